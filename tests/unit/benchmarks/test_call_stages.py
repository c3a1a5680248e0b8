"""The call-stage breakdown's arithmetic (benchmarks/call_stages.py): stamps of two processes
become one duration per stage; a call missing a stamp is left out rather than miscounted."""

from benchmarks import call_stages

# One call's stamps in ns: controller (C) and proc (P), in the order a call takes them.
CONTROLLER = {"encode": 1_000, "write_in": 2_000, "readable": 9_000, "decode": 10_000, "resolved": 11_000, "woken": 13_000}
PROC = {"readable": 3_000, "decode": 4_000, "submit": 4_500, "call_in": 6_000, "call_out": 7_000, "write_in": 8_000}


def test_each_stage_is_the_gap_between_its_stamps_across_processes():
    samples = call_stages.stage_samples([(7, 0, 14_000)], {7: PROC}, {7: CONTROLLER})
    got = {name: values[0] for name, values in samples.items()}
    assert got["caller: pickle args, future, peer"] == 1.0
    assert got["sendmsg, loopback, proc I/O thread wake-up"] == 1.0  # controller write_in -> proc readable
    assert got["actor thread wake-up"] == 1.5
    assert got["sendmsg, loopback, caller I/O thread wake-up"] == 1.0  # proc write_in -> controller readable
    assert got["caller: decode reply"] == 1.0
    assert got["total"] == 14.0
    assert sum(v for k, v in got.items() if k != "total") == got["total"]  # the stages tile the call


def test_a_call_missing_a_stamp_is_left_out():
    partial = dict(PROC)
    del partial["submit"]
    samples = call_stages.stage_samples([(7, 0, 14_000), (8, 0, 14_000)], {7: partial, 8: PROC}, {7: CONTROLLER, 8: CONTROLLER})
    assert all(len(values) == 1 for values in samples.values())
