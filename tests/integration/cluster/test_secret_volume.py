"""A Secret mounted as a volume appears at its path, inside the pod's own mount namespace only."""

import os
import shutil

import pytest
from kubernetes import client

from tests.cluster import testing

pytestmark = pytest.mark.cluster

READ = """
import os, pathlib
root = pathlib.Path(os.environ['MOUNT'])
print(sorted(p.name for p in root.iterdir()))
print((root / 'token').read_text())
print(oct(os.stat(root / 'token').st_mode & 0o777))
try:
    (root / 'new').write_text('x')
    print('writable')
except OSError:
    print('read-only')
"""


def test_mounted_secret_is_visible_to_the_pod_only(cluster, kube, namespace):
    core = client.CoreV1Api(kube)
    core.create_namespaced_secret(namespace, {"metadata": {"name": "mesh-token"},
                                              "stringData": {"token": "abc123", "other": "x"}})
    mount = f"/tmp/procmesh-test-{namespace}/secret"
    pod = testing.python_pod("reader", READ, container={
        "env": [{"name": "MOUNT", "value": mount}],
        "volumeMounts": [{"name": "token", "mountPath": mount, "readOnly": True}]})
    pod["spec"]["volumes"] = [{"name": "token", "secret": {"secretName": "mesh-token", "defaultMode": 0o400}}]
    core.create_namespaced_pod(namespace, pod)

    testing.wait_for(lambda: core.read_namespaced_pod("reader", namespace).status.phase == "Succeeded",
                     "pod to finish")

    lines = testing.pod_output(cluster, namespace, "reader").splitlines()
    assert lines == ["['other', 'token']", "abc123", "0o400", "read-only"]
    # The mount lived in the pod's private mount namespace: the host sees no secret there.
    assert not os.path.exists(f"{mount}/token")
    shutil.rmtree(f"/tmp/procmesh-test-{namespace}")  # the empty mount point the node created
