"""``procmesh logs`` against the real control plane: an 8-proc mesh (more than kubectl's five
concurrent streams), every line prefixed with its proc's rank, selection by rank and coords,
and -f following what actors print afterwards."""

from __future__ import annotations

import queue
import threading

import pytest

from mesh_client.actor import Actor, endpoint
from mesh_client.kubernetes import attach
from tests.cluster import testing
from tests.integration.cli.support import procmesh, start
from tests.integration.operator.support import create_mesh, wait_ready

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
