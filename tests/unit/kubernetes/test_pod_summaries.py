"""A big mesh's readiness check reads the pods' Table rows: they become pod-shaped summaries
that the assessment reads as it reads pods (Ready, Terminating, a stuck container, Pending),
and an answer that is not a Table is refused with what the server sent."""

import pytest

from mesh_client._src import contract
from mesh_client._src.kubernetes import api, assessing
from mesh_client._src.kubernetes.errors import KubernetesMeshError

COLUMNS = ["Name", "Ready", "Status", "Restarts", "Age", "IP", "Node", "Nominated Node",
           "Readiness Gates"]


def table(*rows):
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1",
            "columnDefinitions": [{"name": c, "type": "string"} for c in COLUMNS],
            "rows": [{"cells": [name, ready, status, 0, "1m", "127.250.0.2", "kwok-node-0",
                                "<none>", "<none>"]} for name, ready, status in rows]}


def mesh(size, ready_ranks):
    procs = [{"rank": r, "coords": {"hosts": 0, "procs": r}, "pod": f"big-{r}",
              "ready": r in ready_ranks, "address": f"127.250.0.{r + 2}:26600"} for r in range(size)]
    return {"metadata": {"name": "big", "namespace": "ns", "generation": 1},
            "spec": {"hosts": 1, "perHost": [{"name": "procs", "size": size}]},
            "status": {"observedGeneration": 1, "readyProcs": len(ready_ranks), "desiredProcs": size,
                       "conditions": [{"type": "Ready", "status": "True" if len(ready_ranks) == size
                                       else "False", "reason": "AllProcsReady"}],
                       "procs": [], "procTable": contract.encode_proc_table(procs)}}


def test_running_rows_with_every_container_ready_are_ready_pods():
    pods = api.summaries_of_table(table(("big-0", "1/1", "Running"), ("big-1", "1/1", "Running")))
    assert assessing.assess(mesh(2, {0, 1}), pods).ready


def test_a_row_behind_the_status_makes_it_stale():
    pods = api.summaries_of_table(table(("big-0", "1/1", "Running"), ("big-1", "0/1", "Running")))
    verdict = assessing.assess(mesh(2, {0, 1}), pods)
    assert not verdict.ready and verdict.reason == assessing.STATUS_BEHIND_PODS
    pods = api.summaries_of_table(table(("big-0", "1/1", "Running"), ("big-1", "1/1", "Terminating")))
    assert pods[1]["metadata"]["deletionTimestamp"]
    assert assessing.assess(mesh(2, {0, 1}), pods).reason == assessing.STATUS_BEHIND_PODS


def test_a_stuck_container_is_fatal_and_pending_is_not():
    pods = api.summaries_of_table(table(("big-0", "1/1", "Running"), ("big-1", "0/1", "ErrImagePull")))
    verdict = assessing.assess(mesh(2, {0}), pods)
    assert verdict.fatal and verdict.reason == "ErrImagePull"
    pods = api.summaries_of_table(table(("big-0", "1/1", "Running"), ("big-1", "0/1", "Pending")))
    verdict = assessing.assess(mesh(2, {0}), pods)
    assert not verdict.fatal and not verdict.ready


def test_an_answer_that_is_not_a_table_is_refused():
    with pytest.raises(KubernetesMeshError, match="answered a Table request with 'PodList'"):
        api.summaries_of_table({"kind": "PodList", "items": []})
