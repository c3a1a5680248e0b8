"""The per-device budget: fractions times memory plus one CUDA context per process."""

from mesh_client._src import contract
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
    together = [U("other-0", 0.6), U("trainer-0", 0.5)]
    msg = budgets.explain_overrun("0", "n1", together, 81920, 768, ["trainer"])
    assert "other-0=0.6" in msg and "trainer-0=0.5" in msg and "node n1" in msg
    assert "placed once other procs leave the device" in msg  # trainer-0 alone fits: it waits
    msg = budgets.explain_overrun("0", "n1", together, 81920, 768, ["trainer", "other"])
    assert "create it again with a lower spec.gpus.memoryFraction" in msg  # no wait fixes it


def test_overrun_is_a_wait_only_when_the_procs_that_stay_fit_alone():
    """The mesh's own procs and its colocateWith partner's stay as long as it does: room they
    take never frees, so an overrun among them alone is no wait."""
    uses = [U("policy-0", 0.6), U("other-0", 0.3), U("trainer-0", 0.3)]
    assert budgets.overrun_reason(uses, 81920, 768, ["trainer"]) == contract.WAITING_FOR_GPU_BUDGET
    assert budgets.overrun_reason(uses, 81920, 768, ["trainer", "policy"]) == \
        contract.WAITING_FOR_GPU_BUDGET  # other-0 may leave
    uses = [U("policy-0", 0.6), U("trainer-0", 0.5)]
    assert budgets.overrun_reason(uses, 81920, 768, ["trainer", "policy"]) == \
        contract.BUDGET_EXCEEDED
    own = [U("trainer-0", 0.7), U("trainer-1", 0.5)]
    assert budgets.overrun_reason(own, 81920, 768, ["trainer"]) == contract.BUDGET_EXCEEDED
