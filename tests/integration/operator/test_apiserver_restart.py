"""kube-apiserver stops in the middle of a reconcile (SIGKILL, etcd keeps the state) and comes
back: the operator's watches and writes resume, the mesh becomes Ready with exactly one pod per
rank, one token Secret and one Service, none orphaned; and it still restarts a killed proc (the
watch works again, not only the resync).
"""

import pytest

from tests.cluster import testing
from tests.integration.operator import support

pytestmark = pytest.mark.cluster

SIZE = 12


def test_apiserver_restart_mid_reconcile(cluster, operator, namespace, custom, core):
    support.create_mesh(custom, namespace, "apis", perHost=[{"name": "procs", "size": SIZE}],
                        restartPolicy="RestartProc", maxRestarts=2)
    testing.wait_for(lambda: len(support.mesh_pods(core, namespace, "apis")) >= 1,
                     "the first pods")
    cluster.stop_apiserver()
    cluster.start_apiserver()
    mesh = support.wait_ready(custom, namespace, "apis")

    pods = core.list_namespaced_pod(namespace).items
    assert sorted(p.metadata.name for p in pods) == sorted(f"apis-{r}" for r in range(SIZE))
    assert all(support.owned_by(p, mesh) for p in pods)
    secrets = [s for s in core.list_namespaced_secret(namespace).items
               if s.metadata.name.startswith("apis")]
    services = core.list_namespaced_service(namespace).items
    assert [s.metadata.name for s in secrets] == [support.token_secret(core, namespace, "apis")]
    assert [s.metadata.name for s in services] == ["apis-procs"]
    assert all(support.owned_by(o, mesh) for o in secrets + services)

    support.kill_proc(mesh["status"]["procs"][3]["address"], support.token(core, namespace, "apis"))

    def restarted():
        m = support.get_mesh(custom, namespace, "apis")
        ready = support.condition(m, "Ready").get("status") == "True"
        return m if ready and m["status"]["restarts"] == 1 else None

    testing.wait_for(restarted, "the killed proc restarted after the API server came back")
