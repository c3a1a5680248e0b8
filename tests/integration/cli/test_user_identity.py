"""The CLI as a user the API server knows by a client certificate (``CN=carol``), not a service
account, with no rights at all: each refusal says what to bind to a user, group or service
account (the chart's ``rbac.clientRole.bindings``), not to "this service account"."""

from __future__ import annotations

import pytest

from tests.cluster import kubeconfigs, pki
from tests.integration.cli.support import procmesh

pytestmark = pytest.mark.cluster

MANIFEST = """\
apiVersion: procmesh.io/v1alpha1
kind: ProcMesh
metadata: {name: mine}
spec: {hosts: 1, perHost: [{name: procs, size: 1}]}
"""


def test_refusals_name_the_binding_for_a_certificate_user(cluster, crd, namespace, tmp_path):
    folder = cluster.layout.pki
    carol = pki.make_cert(pki.KeyPair(folder / "ca.crt", folder / "ca.key"), tmp_path, "carol", "carol")
    kc = kubeconfigs.write(tmp_path / "carol.kubeconfig", cluster.server, folder / "ca.crt", carol, "carol")
    created = procmesh(kc, "create", "-n", namespace, "-f", "-", input=MANIFEST)
    assert (created.returncode, created.stdout) == (1, "")
    assert created.stderr == (
        f"error: <stdin>: the API server refused to create procmeshes {namespace}/mine: this client needs the "
        f"'create' permission on procmeshes in namespace {namespace} (the Helm chart's client role grants it: "
        f"rbac.clientRole.create=true, bound by rbac.clientRole.bindings to this client's user, group or "
        f"service account)\n")
