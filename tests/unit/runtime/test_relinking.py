"""Telling a live proc behind a broken link from a gone one (runtime/relinking.py), pure parts.

Aspects: the same ``boot`` is the same process and another is not, whatever else matches;
servers from before ``boot`` are compared by mesh, rank, address and pid; a proc whose
identity was never learnt is gone without asking; a call's message says the proc is alive, and
whether the call was in flight (may or may not have run) or never sent; a forwarder's report
is recognised by those words; a verdict not settled in time is read as gone.
"""

import time

from mesh_client._src.runtime import relinking

ME = {"mesh": "m", "rank": 1, "address": "10.0.0.7:26600", "pid": 1, "boot": "a" * 32}


def test_the_boot_id_decides():
    assert relinking.same_proc(ME, dict(ME))
    assert not relinking.same_proc(ME, {**ME, "boot": "b" * 32})  # a new pod: pid 1 again, another boot
    assert not relinking.same_proc(ME, {k: v for k, v in ME.items() if k != "boot"})


def test_servers_without_a_boot_id_are_compared_by_what_they_say():
    old = {k: v for k, v in ME.items() if k != "boot"}
    assert relinking.same_proc(old, dict(old))
    assert not relinking.same_proc(old, {**old, "pid": 2})
    assert not relinking.same_proc(old, {**old, "rank": 0})


def test_a_proc_never_identified_counts_as_gone_without_asking():
    alive, why = relinking.ask_again(("127.0.0.1", 9), b"token", None, None)
    assert not alive and "had not learnt who the proc was" in why


def test_the_message_says_alive_and_whether_the_call_may_have_run():
    in_flight = relinking.broken_link_text("m[gpus=1]", "m[gpus=1] closed the connection")
    assert "the connection to proc m[gpus=1] broke (m[gpus=1] closed the connection)" in in_flight
    assert "but the proc is alive" in in_flight and "may or may not have run" in in_flight
    not_sent = relinking.broken_link_text("m[gpus=1]", relinking.NOT_SENT + "reset")
    assert "(reset)" in not_sent and "it was not sent" in not_sent and "may or may not" not in not_sent
    assert relinking.says_alive(f"m[gpus=0] (forwarding in the tree): {in_flight}")
    assert not relinking.says_alive("proc ns/m rank 1 (m-1) is gone: killed")


def test_a_late_verdict_reads_as_gone():
    verdict = relinking.Verdict()
    assert verdict.wait(time.monotonic() - relinking.WAIT_SECONDS) is None and not verdict.settled
    verdict.settle("successor")
    assert verdict.wait(time.monotonic()) == "successor"
