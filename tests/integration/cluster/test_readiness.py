"""A pod turns Ready only once its readiness probe passes (tcpSocket, httpGet and exec)."""

import pytest
from kubernetes import client

from tests.cluster import testing

pytestmark = pytest.mark.cluster

# Serves HTTP on the pod IP once the file /tmp/<pod>/go exists, so the test decides when.
SERVER = """
import http.server, os, pathlib, time
gate = pathlib.Path('/tmp/procmesh-readiness') / os.environ['POD_NAME']
while not gate.exists():
    time.sleep(0.1)
open('/tmp/ready-' + os.environ['POD_NAME'], 'w').close()
http.server.HTTPServer((os.environ['POD_IP'], 8080), http.server.SimpleHTTPRequestHandler).serve_forever()
"""

PROBES = {
    "tcp": {"tcpSocket": {"port": 8080}},
    "http": {"httpGet": {"path": "/", "port": "web"}},
    "exec": {"exec": {"command": ["python", "-c", "import os,sys; sys.exit(not os.path.exists('/tmp/ready-' + os.environ['POD_NAME']))"]}},
}


@pytest.mark.parametrize("kind", sorted(PROBES))
def test_pod_turns_ready_through_its_probe(cluster, kube, namespace, kind):
    import pathlib

    core = client.CoreV1Api(kube)
    name = f"ready-{kind}-{namespace}"
    gate = pathlib.Path("/tmp/procmesh-readiness")
    gate.mkdir(exist_ok=True)
    probe = dict(PROBES[kind], periodSeconds=1)
    pod = testing.python_pod(name, SERVER, restart_policy="Always", container={
        "ports": [{"name": "web", "containerPort": 8080}],
        "readinessProbe": probe,
        "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
    })
    core.create_namespaced_pod(namespace, pod)

    running = testing.wait_for(
        lambda: (p := core.read_namespaced_pod(name, namespace)).status.phase == "Running" and p, "Running")
    ready = {c.type: c.status for c in running.status.conditions}
    assert ready["Ready"] == "False"
    assert running.status.container_statuses[0].ready is False

    (gate / name).touch()
    try:
        became = testing.wait_for(
            lambda: (p := core.read_namespaced_pod(name, namespace)).status.container_statuses[0].ready and p,
            "container ready")
    finally:
        (gate / name).unlink()
        pathlib.Path(f"/tmp/ready-{name}").unlink(missing_ok=True)
    conditions = {c.type: c.status for c in became.status.conditions}
    assert conditions["Ready"] == "True" and conditions["ContainersReady"] == "True"
    assert became.status.pod_ip.startswith("127.")
