"""Status that cannot lie: a mesh whose namespace no operator watches keeps its last status,
and the CLI and the client say so instead of repeating it.

The session's operator is stopped and another one runs watching only a different namespace
(the README's "is the operator watching namespace team-x?" case); the mesh's pods then go, and
its spec changes. ``get``/``describe``/``wait`` and ``attach`` name the generation no operator
has reconciled and the namespace to watch; none of them repeats the old "AllProcsReady"; ``logs``
says that the gone pod does not exist, in words, shows the others, and fails (its output is partial);
``logs -f`` follows the gone pod once an operator creates it again (it said 'this client may not
get pods' and never followed it).
"""

from __future__ import annotations

import queue
import threading

import pytest

from mesh_client.kubernetes import MeshNotReady, attach
from tests.cluster import testing
from tests.integration.cli.support import procmesh, start
from tests.integration.operator.support import (
    OperatorProcess,
    create_mesh,
    mesh_pods,
    patch_mesh,
    wait_ready,
)

pytestmark = pytest.mark.cluster


def test_a_mesh_no_operator_watches_is_reported_stale(cluster, kube, core, custom, namespace, operator,
                                                      tmp_path, request):
    create_mesh(custom, namespace, "orphan", hosts=1, perHost=[{"name": "procs", "size": 2}])
    wait_ready(custom, namespace, "orphan")
    kc = cluster.kubeconfig
    operator.stop()
    elsewhere = OperatorProcess(cluster.kubeconfig, tmp_path)
    try:
        elsewhere.start(namespaces=["some-other-namespace"])
        core.delete_namespaced_pod("orphan-0", namespace, grace_period_seconds=0)
        testing.wait_for(lambda: [p.metadata.name for p in mesh_pods(core, namespace, "orphan")] == ["orphan-1"],
                         "pod orphan-0 gone, and no operator to make it again")
        row = procmesh(kc, "get", "orphan", "-n", namespace).stdout.splitlines()[1].split()
        assert row[1:3] == ["2/2", "StatusBehindPods"]  # the old count, never shown as Ready
        described = procmesh(kc, "describe", "orphan", "-n", namespace).stdout
        assert ("Warning:        StatusBehindPods: the status says 2 of 2 procs ready, but pod orphan-0 "
                "is gone") in described
        assert f"watching namespace {namespace}?" in described
        logged = procmesh(kc, "logs", "orphan", "-n", namespace)  # the status still lists orphan-0
        assert logged.returncode == 1 and logged.stdout.startswith("[rank 1] "), logged.stderr
        assert logged.stderr == (f"error: pod {namespace}/orphan-0 does not exist, so its proc has no log now "
                                 f"(its pod is not created yet, or was deleted): 'procmesh describe' shows the "
                                 f"mesh's procs and why\n")
        follower = start(kc, "logs", "orphan", "-n", namespace, "-f")
        request.addfinalizer(lambda: (follower.terminate(), follower.wait(timeout=30)))
        said: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: [said.put(x) for x in follower.stderr], daemon=True).start()
        printed: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: [printed.put(x) for x in follower.stdout], daemon=True).start()
        seen: list[str] = []

        def lines(source: queue.Queue[str], wanted: str) -> bool:
            while not source.empty():
                seen.append(source.get())
            return any(wanted in line for line in seen)

        testing.wait_for(lambda: lines(said, "rank 0: pod orphan-0 does not exist now; following it once it is "
                                             "created and runs"), "logs -f waiting for orphan-0")

        patch_mesh(custom, namespace, "orphan", {"maxRestarts": 7})  # generation 2
        row = procmesh(kc, "get", "orphan", "-n", namespace, "-o", "wide").stdout.splitlines()[1].split()
        assert row[2] == "StatusStale" and row[-1] == "1/2"
        expected = (f"no operator has reconciled generation 2 of this ProcMesh (its status is for "
                    f"generation 1): is the operator running, and watching namespace {namespace}?")
        waited = procmesh(kc, "wait", "orphan", "-n", namespace, "--timeout", "3s")
        assert waited.returncode == 1 and expected in waited.stderr
        assert "AllProcsReady" not in waited.stderr
        with pytest.raises(MeshNotReady) as info:
            attach("orphan", namespace, api_client=kube, timeout=3, progress=False)
        assert expected in str(info.value) and info.value.reason == "StatusStale"
    finally:
        elsewhere.stop()
        operator.start()
    wait_ready(custom, namespace, "orphan")  # the watching operator catches up: generation 2, 2 pods
    testing.wait_for(lambda: lines(printed, "[rank 0] procmesh: proc server orphan[0] listening"),
                     "logs -f following the new orphan-0")
    # Said before the stream opened, but read by another thread than the line above: waited for.
    testing.wait_for(lambda: lines(said, "rank 0: pod orphan-0 runs now: following its log"),
                     "logs -f saying that it follows orphan-0 now")
