"""The checks of issue 16 that do not depend on the gang mechanism, run by test_gangs.py (the
PodGroup API) and test_gang_fallback.py (a cluster without it: the operator's scheduling gate).

Each check gets a :class:`Place`: the node with 6 GPU units and the template fields that put a
plugin mesh on it and nowhere else. The invariant every check asserts, at every look: a mesh
has all its procs on nodes or none (no proc holds a GPU unit while its mesh is incomplete),
looked at whenever the other meshes leave it no room (so no binding can be under way).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from kubernetes import client as k8s

from mesh_client.kubernetes import MeshNotReady, attach
from tests.cluster import testing
from tests.integration.operator import support

UNITS = 6


@dataclasses.dataclass(frozen=True)
class Place:
    """Where the gang checks run: a node name and the mesh template that targets it."""

    node: str
    template: dict[str, Any]


def create(custom: Any, namespace: str, name: str, procs: int, place: Place,
           **template: Any) -> None:
    support.create_mesh(custom, namespace, name, perHost=[{"name": "gpus", "size": procs}],
                        gpus={"mode": "plugin"}, template={**place.template, **template})


def bound(core: Any, namespace: str, name: str) -> int:
    """How many of the mesh's live pods are on a node. (A released gang's pods are bound one
    by one, so a count between 0 and all is only asserted against where nothing can bind.)"""
    pods = [p for p in support.mesh_pods(core, namespace, name)
            if p.metadata.deletion_timestamp is None]
    return sum(1 for p in pods if p.spec.node_name)


def units_held(core: Any, place: Place) -> int:
    """GPU units requested by live pods bound to the check's node (the device plugin's count)."""
    pods = core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={place.node}").items
    return sum(int((c.resources.limits or {}).get("nvidia.com/gpu", 0))
               for p in pods if p.status.phase not in ("Succeeded", "Failed")
               for c in p.spec.containers)


def wait_held(custom: Any, core: Any, namespace: str, name: str, procs: int,
              says: str = "") -> dict[str, Any]:
    """Wait until every pod of the mesh exists and its Scheduled condition says Unschedulable
    (with ``says`` in its message: the gang's explanation can follow a pod's first word), then
    check that none is on a node."""
    def held() -> dict[str, Any] | None:
        mesh = support.get_mesh(custom, namespace, name)
        c = support.condition(mesh, "Scheduled")
        pods = support.mesh_pods(core, namespace, name)
        return mesh if c.get("reason") == "Unschedulable" and says in c.get("message", "") \
            and len(pods) == procs else None
    mesh = testing.wait_for(held, f"{namespace}/{name} held as a gang")
    assert bound(core, namespace, name) == 0
    return mesh


def mesh_larger_than_the_node_holds_nothing(custom: Any, core: Any, kube: Any, namespace: str,
                                            place: Place) -> dict[str, Any]:
    """A 12-proc plugin mesh on 6 units: all 12 pods exist, none is on a node, no unit is held,
    the condition, `kubectl get`'s column and attach's error say why; a 6-proc mesh still fits
    beside it and becomes Ready (the held gang hoards nothing)."""
    create(custom, namespace, "twelve", 12, place)
    mesh = wait_held(custom, core, namespace, "twelve", 12,
                     says="12 procs must be placed together and only 6 fit")
    assert units_held(core, place) == 0
    scheduled = support.condition(mesh, "Scheduled")
    assert scheduled["status"] == "False"
    assert "12 procs must be placed together and only 6 fit" in scheduled["message"], scheduled
    ready = support.condition(mesh, "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "Unschedulable")
    try:
        attach("twelve", namespace, api_client=kube, timeout=4, progress=False)
        raise AssertionError("attach returned for a mesh that cannot be placed")
    except MeshNotReady as error:
        assert error.reason == "Unschedulable"
        assert "12 procs must be placed together" in str(error)
    create(custom, namespace, "six", 6, place)
    support.wait_ready(custom, namespace, "six")
    assert bound(core, namespace, "six") == 6 and bound(core, namespace, "twelve") == 0
    assert units_held(core, place) == UNITS
    return mesh


def meshes_take_turns_without_deadlock(custom: Any, core: Any, namespace: str,
                                       place: Place) -> list[str]:
    """Two 4-proc meshes and one 6-proc mesh on 6 units: only one fits at a time. Each in turn
    becomes Ready while the others hold nothing; deleting it lets the next in. Returns the
    order in which they ran."""
    waiting = {"four-a": 4, "four-b": 4, "six": 6}
    for name, procs in waiting.items():
        create(custom, namespace, name, procs, place)
    order: list[str] = []
    while waiting:
        def one_ready() -> str | None:
            for name in waiting:
                c = support.condition(support.get_mesh(custom, namespace, name), "Ready")
                if c.get("status") == "True":
                    return name
            return None
        running = testing.wait_for(one_ready, f"one of {sorted(waiting)} Ready")
        order.append(running)
        del waiting[running]
        for name in waiting:  # the running one leaves no room: the others hold nothing
            assert bound(core, namespace, name) == 0, f"{name} holds GPUs while {running} runs"
        custom.delete_namespaced_custom_object(
            support.contract.GROUP, support.contract.VERSION, namespace,
            support.contract.PLURAL, running)
    return order


def priority_class(kube: Any, name: str, value: int) -> None:
    scheduling = k8s.SchedulingV1Api(kube)
    try:
        scheduling.create_priority_class(k8s.V1PriorityClass(
            metadata=k8s.V1ObjectMeta(name=name), value=value))
    except k8s.ApiException as e:
        if e.status != 409:
            raise


def priority_passes_through(custom: Any, core: Any, kube: Any, namespace: str,
                            place: Place) -> None:
    """spec.template.priorityClassName reaches every proc pod (and the API server resolves it)."""
    priority_class(kube, "procmesh-gang-high", 1000)
    create(custom, namespace, "urgent", 2, place, priorityClassName="procmesh-gang-high")
    support.wait_ready(custom, namespace, "urgent")
    pods = support.mesh_pods(core, namespace, "urgent")
    assert [p.spec.priority_class_name for p in pods] == ["procmesh-gang-high"] * 2
    assert [p.spec.priority for p in pods] == [1000, 1000]
