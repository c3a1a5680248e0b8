"""Pure parts of reconnecting after a restart on Kubernetes: pod incarnations and the words.

Aspects: pod uids line up with the rank's pod names (None for a missing pod or no pod list);
``status.procs`` addresses parse, IPv6 in brackets included, and a proc without an address yet
gives None; what a lost proc's error adds depends on restartPolicy and the restarts left; a
restart is named with its count and the way on.
"""

from mesh_client._src.kubernetes import reviving


def pod(name, uid):
    return {"metadata": {"name": name, "uid": uid}}


def test_uids_follow_the_pod_names():
    assert reviving.pod_uids([pod("m-1", "b"), pod("m-0", "a")], ["m-0", "m-1", "m-2"]) == ["a", "b", None]
    assert reviving.pod_uids(None, ["m-0"]) == [None]


def test_addresses():
    assert reviving.address_of({"address": "10.0.0.7:26600"}) == ("10.0.0.7", 26600)
    assert reviving.address_of({"address": "[fd00::7]:26600"}) == ("fd00::7", 26600)
    assert reviving.address_of({"rank": 0}) is None


def test_a_replaced_proc_is_reached_once_status_names_its_new_pod():
    pods = [{"metadata": {"name": "m-0"}, "status": {"podIP": "10.0.0.9"}},
            {"metadata": {"name": "m-1"}, "status": {}}]
    assert reviving.pod_ips(pods, ["m-0", "m-1", "m-2"]) == ["10.0.0.9", None, None]
    assert reviving.describes_pod(("10.0.0.9", 26600), "10.0.0.9")
    assert not reviving.describes_pod(("10.0.0.7", 26600), "10.0.0.9")  # the old pod's address
    assert not reviving.describes_pod(("10.0.0.7", 26600), None)  # the new pod has no IP yet
    assert not reviving.describes_pod(None, "10.0.0.9")
    assert reviving.describes_pod(("fd00::9", 26600), "fd00::9")


def test_what_a_lost_proc_adds():
    assert "does not restart it (spawn a new mesh)" in reviving.gone_hint("Never", 0, 3)
    assert "restarts are used up (3 of at most 3)" in reviving.gone_hint("RestartProc", 3, 3)
    coming = reviving.gone_hint("RestartMesh", 1, 3)
    assert coming.startswith("the operator restarts it (restartPolicy RestartMesh, 1 of at most 3 restarts used so far)")
    assert "mesh.respawn()" in coming and "mesh.reconnect()" in coming


def test_a_restart_is_named_with_its_count_and_the_way_on():
    text = reviving.restarted_message("ns/m rank 1 (m-1)", "RestartProc", 1, 2)
    assert text.startswith("proc ns/m rank 1 (m-1) is gone: it was restarted (1 of at most 2 restarts used, restartPolicy RestartProc)")
    assert "re-spawn your actors" in text


def test_a_lost_procs_hint_follows_suspend_then_the_queue_then_the_policy():
    suspended = reviving.lost_hint({"spec": {"suspend": True}}, True, "RestartProc", 0, 3)
    assert suspended.startswith("the mesh is suspended (spec.suspend: true)") and "Kueue" not in suspended
    assert "once Kueue admits the mesh again" in reviving.lost_hint({"spec": {}}, True, "Never", 0, 3)
    assert reviving.lost_hint({"spec": {}}, False, "Never", 0, 3) == reviving.gone_hint("Never", 0, 3)


def test_a_lost_proc_waiting_out_its_back_off_is_not_said_to_restart_now():
    waiting = {"spec": {}, "status": {"conditions": [
        {"type": "Ready", "status": "False", "reason": "CrashLoopBackOff",
         "message": "1 of 2 procs ready; proc 1 (exit code 1, Error) failed 2 times in a row: the operator "
                    "restarts it at 2027-01-15T08:00:11Z, after a back-off of 10 s (...)"}]}}
    hint = reviving.lost_hint(waiting, False, "RestartProc", 1, 100)
    assert hint.startswith("the operator restarts it once its back-off ends, not now (the mesh says "
                           "CrashLoopBackOff: 1 of 2 procs ready; proc 1 (exit code 1, Error) failed 2 times")
    assert "restarts it at 2027-01-15T08:00:11Z" in hint and "re-spawn your actors" in hint
    running = {"spec": {}, "status": {"conditions": [{"type": "Ready", "status": "False", "reason": "ProcsNotReady"}]}}
    assert reviving.lost_hint(running, False, "RestartProc", 1, 100) == reviving.gone_hint("RestartProc", 1, 100)
    # The limit reached or Never: nothing comes, back-off or not.
    assert "restarts are used up" in reviving.lost_hint(waiting, False, "RestartProc", 100, 100)
