"""The per-device budget: fractions times memory plus one CUDA context per process."""

from procmesh_operator import budgets

U = budgets.DeviceUse


def test_pair_fits_and_overflow_is_exact():
    # 0.4 + 0.5 of 80 GiB + 2 x 768 MiB = 75264 MiB <= 81920.
    assert budgets.overflow_mib([U("a", 0.4), U("b", 0.5)], 81920, 768) == -6656


def test_fractions_plus_contexts_can_exceed():
    assert budgets.overflow_mib([U("a", 0.5), U("b", 0.5)], 81920, 768) == 1536


def test_single_uncapped_proc_fits_alone_only():
    assert budgets.overflow_mib([U("a", None)], 81920, 768) < 0
    assert budgets.overflow_mib([U("a", None), U("b", 0.1)], 81920, 768) > 0


def test_message_names_procs_and_fix():
    msg = budgets.explain_overrun("0", "n1", [U("policy-0", 0.6), U("trainer-0", 0.5)], 81920, 768)
    assert "policy-0=0.6" in msg and "trainer-0=0.5" in msg and "node n1" in msg
    assert "memoryFraction" in msg
