"""Which pods of an attached mesh are new processes, and how a failed call says so.

A proc pod's uid is its incarnation: the operator restarts a proc by deleting its pod and
creating one of the same name (pods run with ``restartPolicy: Never``), so a different uid under
a rank's pod name means its actors are gone. :class:`~.attaching.KubernetesProcs` keeps the uids
it attached to, compares them in ``revive`` (``ProcMesh.reconnect``) and in the message of a
failed call. Pure functions: nothing here calls the API.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mesh_client._src import contract
from mesh_client._src.actor import restarts as actor_restarts
from mesh_client._src.kubernetes import assessing

NEVER = contract.RESTART_NEVER  # spec.restartPolicy that restarts nothing


def pod_uids(pods: Sequence[Mapping[str, Any]] | None, names: Sequence[str]) -> list[str | None]:
    """The uid of the pod of each name (None where absent, or when pods may not be listed)."""
    by_name = {(p.get("metadata") or {}).get("name"): (p.get("metadata") or {}).get("uid") for p in pods or []}
    return [by_name.get(name) for name in names]


def pod_ips(pods: Sequence[Mapping[str, Any]] | None, names: Sequence[str]) -> list[str | None]:
    """The ``status.podIP`` of the pod of each name (None where absent or not yet assigned)."""
    by_name = {(p.get("metadata") or {}).get("name"): (p.get("status") or {}).get("podIP") for p in pods or []}
    return [by_name.get(name) or None for name in names]


def describes_pod(entry_address: tuple[str, int] | None, pod_ip: str | None) -> bool:
    """Whether a ``status.procs[]`` address is that of the listed pod. The operator writes status
    after it replaces a pod, so a status read just before still shows the old pod's address:
    a replaced proc is reached only once the two agree (a pod with no IP yet is not there)."""
    return entry_address is not None and pod_ip is not None and entry_address[0] == pod_ip.strip("[]")


def address_of(entry: Mapping[str, Any]) -> tuple[str, int] | None:
    """``status.procs[]``'s ``host:port`` (IPv6 in brackets or not), or None while it has none."""
    text = entry.get("address")
    if not text:
        return None
    host, _, port = str(text).rpartition(":")
    return host.strip("[]"), int(port)


def restart_count(policy: str, restarts: int, max_restarts: int) -> str:
    """"1 of at most 2 restarts used" (the mesh's count, ``status.restarts``: a restart after a
    drain's eviction or a preemption is not counted, so this is no ordinal of the last one)."""
    return f"{restarts} of at most {max_restarts} restarts used, restartPolicy {policy}"


def restarted_message(where: str, policy: str, restarts: int, max_restarts: int) -> str:
    """A call to an actor of a proc whose pod was replaced since this client attached."""
    return (f"proc {where} is gone: it was restarted ({restart_count(policy, restarts, max_restarts)}): a new pod "
            f"replaced the one its actors ran in; {actor_restarts.WAY_ON}")


def gone_hint(policy: str, restarts_used: int, max_restarts: int, back_off: str | None = None) -> str:
    """What follows a lost proc's story: whether the operator brings it back, and the way on.
    ``back_off``: the mesh's word that failed procs wait out their restart back-off
    (:func:`~.assessing.restart_back_off`): the restart comes then, not now."""
    if policy == NEVER:
        return "restartPolicy Never: the operator does not restart it (spawn a new mesh)"
    if restarts_used >= max_restarts:
        return (f"its restarts are used up ({restarts_used} of at most {max_restarts}): the operator "
                f"does not restart it (raise spec.maxRestarts, or spawn a new mesh)")
    if back_off is not None:
        return (f"the operator restarts it once its back-off ends, not now ({back_off}); then "
                f"{actor_restarts.WAY_ON}")
    return (f"the operator restarts it (restartPolicy {policy}, {restarts_used} of at most {max_restarts} "
            f"restarts used so far); then {actor_restarts.WAY_ON}")


def lost_hint(mesh: Mapping[str, Any] | None, queued: bool, policy: str, restarts_used: int,
              max_restarts: int) -> str:
    """What comes after a lost proc: resuming a suspended mesh (``spec.suspend``, queued or
    not: nothing comes back until then), Kueue's admission for a queued one (stopped by Kueue,
    not failed: restartPolicy and the restart count play no part), else the restart policy."""
    if bool(((mesh or {}).get("spec") or {}).get("suspend")):
        return ("the mesh is suspended (spec.suspend: true): its procs start again only once it is resumed "
                f"(spec.suspend: false); once it is Ready, {actor_restarts.WAY_ON}")
    if queued:
        return unadmitted_hint()
    return gone_hint(policy, restarts_used, max_restarts, assessing.restart_back_off(mesh))


def unadmitted_hint() -> str:
    """What follows a proc stopped because its mesh's Kueue workload is not admitted (evicted,
    deactivated): the whole mesh comes back when Kueue admits it again, whatever its
    ``restartPolicy``, and that is no restart (``status.restarts`` does not move)."""
    return ("the operator starts every proc again once Kueue admits the mesh again (whatever its "
            "restartPolicy: this is no restart, status.restarts does not count it); once it is "
            f"Ready, {actor_restarts.WAY_ON}")


def unended_hint(namespace: str, pod_name: str, policy: str) -> str:
    """What follows :func:`~.assessing.unended_story`: the operator restarts a proc only once its
    pod ends, so the user either waits for the proc to answer again or ends the pod."""
    after = "it stays failed (restartPolicy Never)" if policy == NEVER else \
        f"the operator restarts it per restartPolicy {policy}"
    return (f"the operator restarts nothing while its pod runs: once the proc answers again, "
            f"mesh.reconnect() reaches it where it is (its actors kept); or end the pod "
            f"(kubectl delete pod -n {namespace} {pod_name}) and {after}")


def unknown_end_note(namespace: str, mesh_name: str, pod_name: str) -> str:
    """A lost proc whose end its pod's status does not show yet (the kubelet reports it a moment
    later): where to read it, as the supervision event that follows will carry it."""
    return (f"how it ended is not in its pod's status yet: see kubectl describe pod -n {namespace} {pod_name}, "
            f"or procmesh describe -n {namespace} {mesh_name} (LAST FAILURE), in a moment")
