"""A ProcMesh's Kueue queue label is fixed for its life, refused at ``kubectl`` by the API server
(the ValidatingAdmissionPolicy of crds/procmesh-queue-label.yaml, applied with the CRD).

Aspects: adding ``kueue.x-k8s.io/queue-name`` to a mesh, removing it, and changing it are each
refused with a message that says what was there, what the update does and what to do; the mesh
keeps its label; other label changes and spec changes go through.
"""

from __future__ import annotations

import json

import pytest

from procmesh_operator import workloads
from tests.cluster import testing
from tests.integration.operator import support

pytestmark = pytest.mark.cluster

KEY = workloads.QUEUE_NAME_LABEL


def create(custom, namespace, name, labels):
    body = support.mesh_manifest(name, perHost=[{"name": "procs", "size": 1}], suspend=True)
    body["metadata"]["labels"] = labels
    custom.create_namespaced_custom_object(support.contract.GROUP, support.contract.VERSION, namespace,
                                           support.contract.PLURAL, body)


def relabel(cluster, namespace, name, labels, dry_run=False):
    """``kubectl patch`` of the mesh's labels (None removes one); the completed process."""
    args = ["patch", "pm", name, "-n", namespace, "--type=merge", "-p", json.dumps({"metadata": {"labels": labels}})]
    return support.kubectl(cluster, *args, *(["--dry-run=server"] if dry_run else []), check=False)


def labels_of(custom, namespace, name):
    return support.get_mesh(custom, namespace, name)["metadata"].get("labels") or {}


def test_the_queue_label_cannot_be_added_removed_or_changed(cluster, crd, namespace, custom):
    create(custom, namespace, "unqueued", {"team": "a"})
    create(custom, namespace, "queued", {KEY: "team"})
    # The API server enforces a new policy once its informer has it: wait for the first refusal.
    testing.wait_for(lambda: relabel(cluster, namespace, "unqueued", {KEY: "team"}, dry_run=True).returncode != 0,
                     "the API server enforcing the queue-label policy")

    added = relabel(cluster, namespace, "unqueued", {KEY: "team"})
    assert added.returncode != 0
    assert ("the label kueue.x-k8s.io/queue-name of ProcMesh unqueued is fixed for the life of the mesh "
            "(it has none, the update makes it team)") in added.stderr, added.stderr
    assert "delete the mesh and create it again with the queue you want" in added.stderr

    removed = relabel(cluster, namespace, "queued", {KEY: None})
    assert removed.returncode != 0 and "(it is team, the update removes it)" in removed.stderr, removed.stderr
    changed = relabel(cluster, namespace, "queued", {KEY: "other"})
    assert changed.returncode != 0 and "(it is team, the update makes it other)" in changed.stderr, changed.stderr
    assert labels_of(custom, namespace, "queued")[KEY] == "team"
    assert KEY not in labels_of(custom, namespace, "unqueued")

    assert relabel(cluster, namespace, "queued", {"owner": "me"}).returncode == 0  # other labels change
    assert relabel(cluster, namespace, "unqueued", {"team": None}).returncode == 0
    support.patch_mesh(custom, namespace, "queued", {"maxRestarts": 5})  # and the spec
    assert labels_of(custom, namespace, "queued") == {KEY: "team", "owner": "me"}
