"""Does a whole gang fit the cluster right now? The check behind the gate mode of
:mod:`.ganging`. Pure.

:mod:`.reconciling` lists the nodes and every pod (not only proc pods: anything bound holds
room), then calls :func:`fit` with the gated pods of one mesh. Each node's room is its
allocatable resources (every resource name: cpu, memory, ``nvidia.com/gpu``, pods) minus the
requests of the live pods bound to it. Pods already released but not bound yet (another mesh
a moment ago) are placed first, as reservations; then the gang's pods, largest first, each on
the first eligible node with room (first-fit decreasing). Eligible means: Ready, not cordoned
(unless the pod tolerates the cordon's taint, as the scheduler lets it),
``nodeSelector`` and required node affinity match, and every NoSchedule/NoExecute taint is
tolerated, and the required inter-pod (anti-)affinity on ``kubernetes.io/hostname`` holds
(:mod:`.interpod`: the terms that keep a mesh's hosts on distinct nodes). Other inter-pod terms,
topology spread and volumes are not simulated (the scheduler still judges them; see the README's
race windows). Pinned placement (:mod:`.placing`) judges node terms, readiness, cordons and
taints with :func:`node_matches` and :func:`unfit` too.
"""

from __future__ import annotations

import dataclasses
import decimal
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from procmesh_operator import interpod, losses, names
from procmesh_operator import tolerations as tolerations_

#: Requests are compared in thousandths (millicores for cpu), as integers.
_SCALE = 1000
_SUFFIXES: dict[str, decimal.Decimal | int] = {
    "": 1, "m": decimal.Decimal("0.001"), "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12,
    "P": 10**15, "E": 10**18, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50,
    "Ei": 2**60,
}
_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)([a-zA-Z]*)$")
PODS = "pods"


def quantity(value: Any) -> int:
    """A Kubernetes quantity (``"500m"``, ``"2Gi"``, ``4``) in thousandths, rounded up."""
    match = _QUANTITY.match(str(value).strip())
    if match is None or match.group(2) not in _SUFFIXES:
        raise ValueError(f"not a Kubernetes quantity: {value!r}")
    amount = decimal.Decimal(match.group(1)) * decimal.Decimal(_SUFFIXES[match.group(2)])
    return int((amount * _SCALE).to_integral_value(rounding=decimal.ROUND_CEILING))


def requests_of(pod: Mapping[str, Any]) -> dict[str, int]:
    """What the scheduler reserves for ``pod``: the sum over containers of their requests
    (limits where a request is absent, as the API server defaults them), at least each init
    container's, plus the pod overhead, plus one ``pods`` slot."""
    spec = pod.get("spec") or {}

    def of(container: Mapping[str, Any]) -> dict[str, int]:
        resources = container.get("resources") or {}
        merged = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        return {str(k): quantity(v) for k, v in merged.items()}

    total: dict[str, int] = {}
    for container in spec.get("containers") or []:
        for name, amount in of(container).items():
            total[name] = total.get(name, 0) + amount
    for container in spec.get("initContainers") or []:
        for name, amount in of(container).items():
            total[name] = max(total.get(name, 0), amount)
    for name, amount in (spec.get("overhead") or {}).items():
        total[str(name)] = total.get(str(name), 0) + quantity(amount)
    total[PODS] = total.get(PODS, 0) + _SCALE
    return total


def _terminal(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


@dataclasses.dataclass
class Room:
    """One node as the check sees it: what is left of its allocatable resources."""

    name: str
    labels: Mapping[str, str]
    taints: Sequence[Mapping[str, Any]]
    ready: bool
    unschedulable: bool  # cordoned
    free: dict[str, int]
    allocatable: Mapping[str, int]
    pods: list[Mapping[str, Any]] = dataclasses.field(default_factory=list)  # live, on it


def rooms(nodes: Iterable[Mapping[str, Any]], pods: Iterable[Mapping[str, Any]]) -> list[Room]:
    """Every node with its allocatable minus the requests of the live pods bound to it (a
    terminating pod still holds its room until it is gone), sorted by name."""
    out: dict[str, Room] = {}
    for node in nodes:
        meta = node.get("metadata") or {}
        status = node.get("status") or {}
        allocatable = {str(k): quantity(v) for k, v in (status.get("allocatable") or {}).items()}
        out[str(meta.get("name"))] = Room(
            name=str(meta.get("name")), labels=meta.get("labels") or {},
            taints=(node.get("spec") or {}).get("taints") or [],
            ready=losses.is_ready(node), unschedulable=bool((node.get("spec") or {}).get("unschedulable")),
            free=dict(allocatable), allocatable=allocatable)
    for pod in pods:
        room = out.get(str((pod.get("spec") or {}).get("nodeName") or ""))
        if room is None or _terminal(pod):
            continue
        _take(pod, room)
    return [out[name] for name in sorted(out)]


def _expression(expr: Mapping[str, Any], value: str | None) -> bool:
    op = expr.get("operator")
    values = [str(v) for v in expr.get("values") or []]
    if op == "In":
        return value is not None and value in values
    if op == "NotIn":
        return value is None or value not in values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt") and value is not None and values:
        try:
            left, right = int(value), int(values[0])
        except ValueError:
            return False
        return left > right if op == "Gt" else left < right
    return False


def _affinity_matches(pod: Mapping[str, Any], room: Room) -> bool:
    return node_matches(pod.get("spec") or {}, room.labels, room.name)


def node_matches(spec: Mapping[str, Any], labels: Mapping[str, str], name: str) -> bool:
    """Whether a pod ``spec``'s nodeSelector and required node affinity allow the node named
    ``name`` with ``labels``, as the scheduler judges them: shared by the gang's fit check and
    pinned placement (:mod:`.placing`), so both judge a node alike."""
    selector = spec.get("nodeSelector") or {}
    if any(labels.get(k) != str(v) for k, v in selector.items()):
        return False
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms = required.get("nodeSelectorTerms") or []
    if not terms:
        return True
    fields = {"metadata.name": name}
    return any(
        all(_expression(e, labels.get(str(e.get("key")))) for e in t.get("matchExpressions") or [])
        and all(_expression(e, fields.get(str(e.get("key")))) for e in t.get("matchFields") or [])
        for t in terms)


#: The taint effects that keep a pod off a node (PreferNoSchedule only steers the scheduler).
BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")


def _tolerates(tolerations: Iterable[Mapping[str, Any]], taint: Mapping[str, Any]) -> bool:
    return any(tolerations_.tolerates(t, taint) for t in tolerations)


def blocking_taints(node: Mapping[str, Any]) -> frozenset[tuple[str, str, str]]:
    """A Node object's NoSchedule/NoExecute taints as ``(key, value, effect)``: a mesh waiting
    for a node is looked at again when one is lifted (:mod:`.reconciling`)."""
    return frozenset((str(t.get("key") or ""), str(t.get("value") or ""), str(t.get("effect")))
                     for t in (node.get("spec") or {}).get("taints") or []
                     if t.get("effect") in BLOCKING_EFFECTS)


def untolerated(tolerations: Sequence[Mapping[str, Any]], taints: Iterable[Mapping[str, Any]]
                ) -> str | None:
    """The first NoSchedule/NoExecute taint of a node that ``tolerations`` (a pod's) do not
    tolerate, as the scheduler words it (``untolerated taint KEY``); None if the pod may go
    there. Shared by the gang's fit check and pinned placement, so both judge taints alike."""
    for taint in taints:
        if taint.get("effect") in BLOCKING_EFFECTS and not _tolerates(tolerations, taint):
            return f"untolerated taint {taint.get('key')}"
    return None


#: What a cordoned node (spec.unschedulable) is judged by, whether or not the node lifecycle
#: controller has put it in spec.taints yet: the scheduler's NodeUnschedulable filter lets a pod
#: that tolerates this taint go there (v1.36 pkg/scheduler/framework/plugins/nodeunschedulable).
CORDON: Mapping[str, str] = {"key": names.UNSCHEDULABLE_TAINT, "effect": "NoSchedule"}


def unfit(tolerations: Sequence[Mapping[str, Any]], taints: Iterable[Mapping[str, Any]], *,
          ready: bool, unschedulable: bool) -> str | None:
    """Why a pod with ``tolerations`` may not go to a node now, as the scheduler words it, or
    None: not Ready, cordoned (unless the pod tolerates :data:`CORDON`), or a NoSchedule/NoExecute
    taint it does not tolerate. Each clears by the node's own change (Ready again, uncordoned,
    untainted), which a waiting mesh is woken by. Shared by the gang's fit check and pinned
    placement, a host's first procs and its later ones alike."""
    return _closed(tolerations, ready=ready, unschedulable=unschedulable) \
        or untolerated(tolerations, taints)


def _closed(tolerations: Sequence[Mapping[str, Any]], *, ready: bool, unschedulable: bool
            ) -> str | None:
    if not ready:
        return "not Ready"
    if unschedulable and not _tolerates(tolerations, CORDON):
        return "unschedulable (cordoned)"
    return None


def why_not(pod: Mapping[str, Any], room: Room, space: Sequence[Room] | None = None,
            first: bool | None = None) -> str | None:
    """None if ``pod`` can go to ``room`` now, else a short reason as the scheduler words it.
    ``space``: every room (for inter-pod affinity; None: only ``room``'s pods are known);
    ``first``: :func:`interpod.first_of_group` of ``pod`` over ``space``, if known already."""
    tolerations = (pod.get("spec") or {}).get("tolerations") or []
    closed = _closed(tolerations, ready=room.ready, unschedulable=room.unschedulable)
    if closed is not None:
        return closed
    if not _affinity_matches(pod, room):
        return "node does not match the pod's node selector or affinity"
    taint = untolerated(tolerations, room.taints)
    if taint is not None:
        return taint
    short = [name for name, amount in requests_of(pod).items()
             if amount > 0 and room.free.get(name, 0) < amount]
    if short:
        return ", ".join(f"Insufficient {name} ({_show(room.free.get(name, 0), name)} free of "
                         f"{_show(room.allocatable.get(name, 0), name)})" for name in sorted(short))
    if first is None:
        placed = interpod.Placed((p, r.name) for r in space or [room] for p in r.pods)
        first = interpod.first_of_group(pod, placed)
    return interpod.why_not(pod, room.pods, first)


def _first_room(pod: Mapping[str, Any], space: Sequence[Room], placed: interpod.Placed
                ) -> tuple[Room | None, dict[str, str | None]]:
    """The first room that takes ``pod`` (None if none does) and the reasons of those before.
    ``placed``: every pod in ``space``'s rooms."""
    first = interpod.first_of_group(pod, placed)
    only = interpod.affinity_nodes(pod, placed)  # a host's later procs: its node, no other
    reasons: dict[str, str | None] = {}
    for room in space:
        if only is not None and room.name not in only:
            reasons[room.name] = "node(s) didn't match pod affinity rules"
            continue
        reasons[room.name] = why_not(pod, room, space, first)
        if reasons[room.name] is None:
            return room, reasons
    return None, reasons


def _show(amount: int, name: str) -> str:
    if name == "cpu":
        return f"{amount}m" if amount % _SCALE else str(amount // _SCALE)
    if name == "memory" or name.startswith(("ephemeral-storage", "hugepages-")):
        return f"{amount // _SCALE // 2**20}Mi"
    amount = max(amount, 0)
    return str(amount // _SCALE) if amount % _SCALE == 0 else f"{amount / _SCALE:g}"


def _take(pod: Mapping[str, Any], room: Room) -> None:
    for name, amount in requests_of(pod).items():
        room.free[name] = room.free.get(name, 0) - amount
    room.pods.append(pod)


def _size_key(pod: Mapping[str, Any]) -> tuple[int, ...]:
    r = requests_of(pod)
    extended = sum(v for k, v in r.items() if "/" in k)
    return (-extended, -r.get("cpu", 0), -r.get("memory", 0))


@dataclasses.dataclass(frozen=True)
class Fit:
    """The outcome: whether the whole gang fits, and if not, why (scheduler-style message)."""

    fits: bool
    message: str = ""


def fit(gang: Sequence[Mapping[str, Any]], nodes: Sequence[Mapping[str, Any]],
        pods: Sequence[Mapping[str, Any]]) -> Fit:
    """Whether every pod of ``gang`` fits ``nodes`` at once, given every pod in the cluster
    (``pods``; the gang's own are recognised by uid and skipped)."""
    own = {str((p.get("metadata") or {}).get("uid")) for p in gang}
    others = [p for p in pods if str((p.get("metadata") or {}).get("uid")) not in own]
    space = rooms(nodes, others)
    # Released a moment ago and not bound yet: they will take room somewhere first.
    pending = [p for p in others if not (p.get("spec") or {}).get("nodeName")
               and not (p.get("spec") or {}).get("schedulingGates") and not _terminal(p)
               and not (p.get("metadata") or {}).get("deletionTimestamp")]
    everywhere = interpod.Placed((p, r.name) for r in space for p in r.pods)
    for pod in sorted(pending, key=_size_key):
        room, _ = _first_room(pod, space, everywhere)
        if room is not None:
            _take(pod, room)
            everywhere.add(pod, room.name)
    placed = 0
    for pod in sorted(gang, key=_size_key):
        room, reasons = _first_room(pod, space, everywhere)
        if room is None:
            name = (pod.get("metadata") or {}).get("name", "?")
            detail = "; ".join(f"{n}: {why}" for n, why in reasons.items()) or "the cluster has no nodes"
            after = " after those" if placed else ""
            return Fit(False, f"{len(gang)} procs must be placed together and only {placed} "
                              f"fit: 0/{len(space)} nodes can take pod {name}{after}: {detail}")
        _take(pod, room)
        everywhere.add(pod, room.name)
        placed += 1
    return Fit(True)
