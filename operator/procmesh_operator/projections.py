"""The slim pod: only the fields of a proc pod that the operator reads, kept in its cache.

A pod as the API server returns it is 5 to 20 kB of JSON (defaulted fields, the service account
volume, image IDs, ``managedFields``) and several times that as Python objects; at thousands of
pods the cache of whole pods was most of the operator's memory. :func:`slim_pod` keeps what
:mod:`.planning`, :mod:`.statuses`, :mod:`.eventing`, :mod:`.ganging`, :mod:`.fitting` (the gang's
own pods), :mod:`.losses` and :mod:`.assigned_gpus` read, and nothing else, as client-go's
informers do with a transform function. Applied by :mod:`.handlers` to every pod event (before
the body is copied, so the copy is small too) and by :mod:`.stores` to every pod it keeps (list
items and the operator's own create/delete responses). A new reader of a pod field adds it here;
``tests/unit/operator/test_projections.py`` checks every reader against a projected pod.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from procmesh_operator import assigned_gpus

#: metadata: identity, the store's version order, the mesh label, owners, placement annotations,
#: age (a pod no scheduler looks at, :func:`statuses.unseen_by_scheduler`).
METADATA_FIELDS = ("name", "namespace", "uid", "resourceVersion", "labels", "annotations",
                   "ownerReferences", "deletionTimestamp", "creationTimestamp")
#: spec: binding, the gang (gates, group), and what fitting.fit needs to place the gang.
SPEC_FIELDS = ("nodeName", "schedulingGates", "schedulingGroup", "nodeSelector", "tolerations",
               "affinity", "overhead", "priorityClassName", "priority", "schedulerName")
#: spec.containers[] / initContainers[]: resources for fitting, env for assigned_gpus (of
#: which only the entries in READ_ENV are kept).
CONTAINER_FIELDS = ("name", "resources", "env")
READ_ENV = (assigned_gpus.VISIBLE_DEVICES_ENV,)
INIT_CONTAINER_FIELDS = ("name", "resources")
#: status: phase, conditions (Ready, PodScheduled), the address, why it ended.
STATUS_FIELDS = ("phase", "conditions", "podIP", "reason", "message")
#: status.containerStatuses[]: stuck waiting reasons, exit codes, restarts.
CONTAINER_STATUS_FIELDS = ("name", "ready", "restartCount", "state")


def _pick(source: Any, fields: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(source, Mapping):
        return {}
    return {k: source[k] for k in fields if source.get(k) is not None}


def _picks(items: Any, fields: tuple[str, ...]) -> list[dict[str, Any]]:
    return [_pick(item, fields) for item in items or () if isinstance(item, Mapping)]


def slim_pod(pod: Mapping[str, Any]) -> dict[str, Any]:
    """The projection of ``pod`` the operator keeps. Nested values are shared with ``pod``,
    not copied: copy the result if ``pod`` is a live view that will change."""
    slim: dict[str, Any] = {"metadata": _pick(pod.get("metadata"), METADATA_FIELDS)}
    spec_in = pod.get("spec")
    if isinstance(spec_in, Mapping):
        spec = _pick(spec_in, SPEC_FIELDS)
        if spec_in.get("containers"):
            containers = _picks(spec_in["containers"], CONTAINER_FIELDS)
            for container in containers:
                if "env" in container:
                    container["env"] = [e for e in container["env"] if isinstance(e, Mapping)
                                        and e.get("name") in READ_ENV]
            spec["containers"] = containers
        if spec_in.get("initContainers"):
            spec["initContainers"] = _picks(spec_in["initContainers"], INIT_CONTAINER_FIELDS)
        slim["spec"] = spec
    status_in = pod.get("status")
    if isinstance(status_in, Mapping):
        status = _pick(status_in, STATUS_FIELDS)
        if status_in.get("containerStatuses"):
            status["containerStatuses"] = _picks(status_in["containerStatuses"],
                                                 CONTAINER_STATUS_FIELDS)
        slim["status"] = status
    return slim
