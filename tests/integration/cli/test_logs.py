"""``procmesh logs`` against the real control plane: an 8-proc mesh (more than kubectl's five
concurrent streams), every line prefixed with its proc's rank, selection by rank and coords,
-f following what actors print afterwards, a proc's new pod after it restarts (said on
stderr) and a proc whose pod had not started when -f began (Pending: once it runs), -p saying once why a restarted proc has no earlier run's log, and a mesh with no procs
(suspended) said as such, not as a --rank/--coords that matched nothing."""

from __future__ import annotations

import queue
import threading
import uuid

import pytest

from mesh_client.actor import Actor, endpoint
from mesh_client.kubernetes import attach
from tests.cluster import testing
from tests.integration.cli.support import procmesh, start
from tests.integration.operator.support import (
    create_mesh,
    get_mesh,
    kill_proc,
    mesh_pods,
    token,
    wait_ready,
)

pytestmark = pytest.mark.cluster


class Talker(Actor):
    @endpoint
    def say(self, word: str) -> None:
        import os

        print(f"{word} from {os.environ['PROCMESH_RANK']}", flush=True)


def test_logs_of_eight_procs_interleaved_with_rank_prefixes(cluster, kube, custom, namespace, operator):
    create_mesh(custom, namespace, "eight", hosts=2, perHost=[{"name": "procs", "size": 4}])
    wait_ready(custom, namespace, "eight")
    kc = cluster.kubeconfig
    result = procmesh(kc, "logs", "eight", "-n", namespace)
    assert result.returncode == 0, result.stderr
    startup = [line.split(" listening on ")[0] for line in result.stdout.splitlines() if "listening on" in line]
    # The prefix is the rank of the proc that wrote the line (each proc prints its own rank).
    assert sorted(startup) == [f"[rank {r}] procmesh: proc server eight[{r}]" for r in range(8)]

    host1 = procmesh(kc, "logs", "eight", "-n", namespace, "--coords", "hosts=1").stdout
    assert sorted({line.split("]")[0] for line in host1.splitlines()}) == [f"[rank {r}" for r in (4, 5, 6, 7)]
    one = procmesh(kc, "logs", "eight", "-n", namespace, "--rank", "3", "--no-prefix").stdout
    assert one.startswith("procmesh: proc server eight[3] listening")
    missing = procmesh(kc, "logs", "eight", "-n", namespace, "--rank", "9")
    assert missing.returncode == 1 and "no proc of ProcMesh" in missing.stderr


def test_logs_follow_shows_what_actors_print_later(cluster, kube, custom, namespace, operator):
    create_mesh(custom, namespace, "talk", hosts=2, perHost=[{"name": "procs", "size": 4}])
    mesh = attach("talk", namespace, api_client=kube, timeout=120, progress=False)
    follower = start(cluster.kubeconfig, "logs", "talk", "-n", namespace, "-f")
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(x) for x in follower.stdout], daemon=True)
    reader.start()
    seen: set[str] = set()

    def has(wanted: set[str]) -> bool:
        while not lines.empty():
            seen.add(lines.get().rstrip("\n"))
        return wanted <= seen

    try:
        started = {f"[rank {r}] procmesh: proc server talk[{r}]" for r in range(8)}
        testing.wait_for(lambda: has(set()) and started <= {x.split(" listening on ")[0] for x in seen},
                         "eight streams followed")
        mesh.spawn("talker", Talker).say.call("hello").get()
        testing.wait_for(lambda: has({f"[rank {r}] hello from {r}" for r in range(8)}),
                         "what the actors printed, each with its rank")
    finally:
        follower.terminate()
        follower.wait(timeout=30)
        mesh.stop().get()


def test_logs_follow_a_restarted_proc_into_its_new_pod(cluster, core, custom, namespace, operator):
    create_mesh(custom, namespace, "phoenix", hosts=1, perHost=[{"name": "procs", "size": 2}],
                restartPolicy="RestartProc")
    mesh = wait_ready(custom, namespace, "phoenix")
    follower = start(cluster.kubeconfig, "logs", "phoenix", "-n", namespace, "-f")
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(x) for x in follower.stdout], daemon=True)
    reader.start()
    seen: list[str] = []

    def started(rank: int) -> int:
        while not lines.empty():
            seen.append(lines.get().rstrip("\n"))
        return sum(x.startswith(f"[rank {rank}] procmesh: proc server phoenix[{rank}] listening") for x in seen)

    try:
        testing.wait_for(lambda: started(0) and started(1), "both streams followed")
        kill_proc(mesh["status"]["procs"][1]["address"], token(core, namespace, "phoenix"))
        testing.wait_for(lambda: started(1) == 2, "rank 1's new pod followed: its proc server starts again")
        assert started(0) == 1
    finally:
        follower.terminate()
        _, err = follower.communicate(timeout=30)
    assert "procmesh logs: rank 1: the log stream of pod phoenix-1 ended; following its proc's new pod" in err
    assert "procmesh logs: rank 1: pod phoenix-1 is new (its proc restarted): following its log" in err
    assert "rank 0" not in err

    testing.wait_for(lambda: get_mesh(custom, namespace, "phoenix")["status"]["readyProcs"] == 2 or None,
                     "rank 1 ready again")
    previous = procmesh(cluster.kubeconfig, "logs", "phoenix", "-n", namespace, "-p")
    assert (previous.returncode, previous.stdout) == (1, ""), previous.stderr
    assert previous.stderr.startswith("error: no earlier run's log (--previous): a proc runs once in its pod "
                                      "(restartPolicy Never); a restarted proc is a new pod of the same name")
    assert previous.stderr.count("\n") == 1, previous.stderr  # one line for both procs


def test_logs_follow_a_proc_whose_pod_has_not_started_yet(cluster, core, custom, namespace, operator,
                                                          request):
    # Its pod asks for a node label that no node has until the test gives it to one: the pod
    # exists, Pending, with no log yet (the API server answers with an empty stream) until it runs.
    key = f"procmesh.io/test-later-{uuid.uuid4().hex[:6]}"
    create_mesh(custom, namespace, "later", hosts=1, perHost=[{"name": "procs", "size": 1}],
                restartPolicy="Never", template={"nodeSelector": {key: "yes"}})
    pod = testing.wait_for(lambda: (mesh_pods(core, namespace, "later") or [None])[0], "later's pod, Pending")
    follower = start(cluster.kubeconfig, "logs", "later", "-n", namespace, "-f")
    request.addfinalizer(lambda: (follower.terminate(), follower.wait(timeout=30)))
    said: queue.Queue[str] = queue.Queue()
    readers = [threading.Thread(target=lambda: [said.put(x) for x in follower.stderr], daemon=True)]
    printed: queue.Queue[str] = queue.Queue()
    readers.append(threading.Thread(target=lambda: [printed.put(x) for x in follower.stdout], daemon=True))
    for reader in readers:
        reader.start()
    seen: dict[str, list[str]] = {"said": [], "printed": []}

    def lines(source: queue.Queue[str], into: str, wanted: str) -> bool:
        while not source.empty():
            seen[into].append(source.get())
        return any(wanted in line for line in seen[into])

    testing.wait_for(lambda: lines(said, "said", "rank 0: pod later-0 has not started yet; following it once it "
                                                 "runs"), "logs -f waiting for later-0 to run")
    node = next(n.metadata.name for n in core.list_node().items if not n.spec.taints)
    core.patch_node(node, {"metadata": {"labels": {key: "yes"}}})
    request.addfinalizer(lambda: core.patch_node(node, {"metadata": {"labels": {key: None}}}))
    # Without the fix it waited for a new pod (a restart) and never read this one's log.
    testing.wait_for(lambda: lines(printed, "printed", "[rank 0] procmesh: proc server later[0] listening"),
                     "logs -f following later-0 once it runs")
    testing.wait_for(lambda: lines(said, "said", "rank 0: pod later-0 runs now: following its log"),
                     "logs -f saying that it follows later-0 now")
    assert [p.metadata.uid for p in mesh_pods(core, namespace, "later")] == [pod.metadata.uid]  # the same pod

    # Its proc ends (restartPolicy Never): logs -f ends by itself, and with status 0: the proc's
    # log was read whole (it said 'error: pod ... had not started' and exited 1).
    mesh = wait_ready(custom, namespace, "later")
    kill_proc(mesh["status"]["procs"][0]["address"], token(core, namespace, "later"))
    assert follower.wait(timeout=120) == 0, (lines(said, "said", ""), seen)
    for reader in readers:
        reader.join(timeout=30)
    assert lines(said, "said", "rank 0: pod later-0 ended and the mesh's restartPolicy is Never"), seen
    assert not [line for line in seen["said"] if line.startswith("error:")], seen


def test_logs_of_a_mesh_without_procs_says_why(cluster, custom, namespace, operator):
    create_mesh(custom, namespace, "asleep", hosts=1, perHost=[{"name": "procs", "size": 2}], suspend=True)
    testing.wait_for(lambda: (get_mesh(custom, namespace, "asleep").get("status") or {}).get("phase") == "Suspended",
                     "the mesh suspended")
    result = procmesh(cluster.kubeconfig, "logs", "asleep", "-n", namespace)
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (f"error: ProcMesh {namespace}/asleep has no proc pods to read logs of (phase "
                             f"Suspended); 'procmesh describe asleep -n {namespace}' says why\n")
