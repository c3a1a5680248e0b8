"""``attach()``: a ProcMesh resource as a proc mesh of this client.

Waits until the mesh is Ready (with a progress line on a terminal), reads the proc addresses
from ``status.procs`` (or a big mesh's ``status.procTable``: :func:`contract.status_procs`) and the token from the mesh's Secret (``spec.tokenSecretName``, else the operator's
``status.tokenSecretName``, else the legacy ``<name>-token``: :func:`.api.token_secret_name`, what
the mesh's access Role grants), connects to every proc server, and runs
``bootstrap`` there. When a proc dies, failed calls say what its pod's status says, and
whether the operator restarts it; after a restart (a new pod uid, :mod:`.reviving`),
``ProcMesh.reconnect``/``respawn`` come here (:meth:`KubernetesProcs.revive`) for the new procs;
a client that may not list pods asks each lost proc who it is instead (its boot id). A broken
connection to a live proc needs neither: the client reconnects by itself (runtime/relinking.py).
"""

from __future__ import annotations

import functools
import math
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from mesh_client._src import contract
from mesh_client._src.actor import shutting_down
from mesh_client._src.actor.proc_mesh import ProcMesh
from mesh_client._src.actor.procs import ProcGroup, Revived
from mesh_client._src.actor.shape import Shape
from mesh_client._src.kubernetes import api as api_mod
from mesh_client._src.kubernetes import (
    assessing,
    forwarding,
    lifetimes,
    output,
    reviving,
    stale_tokens,
    transport,
)
from mesh_client._src.kubernetes.errors import ApiServerUnreachable, MeshNotFound, MeshNotReady
from mesh_client._src.runtime import (
    channel,
    identifying,
    interrupts,
    natives,
    offloading,
    peers,
    relinking,
    unixlinks,
)
from mesh_client._src.server import logging_mode
from mesh_client._src.wire import errors as wire_errors

DEFAULT_TIMEOUT = 600.0
#: How long ``revive`` waits for a lost proc whose pod is unchanged to answer (a live one: ms).
PROBE_SECONDS = 5.0


class KubernetesProcs:
    """The owner of an attached mesh's ProcGroup: explains deaths, and deletes only what it made."""

    def __init__(self, api: api_mod.KubeApi, mesh: dict[str, Any], pod_names: Sequence[str], created: bool,
                 lease: lifetimes.LeaseRenewer | None = None) -> None:
        self.api = api
        self.lease = lease  # the creator's lifetimes.LeaseRenewer, stopped with the mesh
        self.output: output.OutputForwarder | None = None  # the procs' output, while attached
        self.name = mesh["metadata"]["name"]
        self.uid: str | None = mesh["metadata"].get("uid")  # the mesh attached to; stop() deletes no other
        self.pod_names = list(pod_names)
        self.created = created
        self._follow(mesh)
        self._run_id = f"{self.name}-{mesh['metadata'].get('uid', '')[:8]}"
        self.uids: list[str | None] = [None] * len(self.pod_names)  # the pods attached to (None: unknown)
        self.timeout = DEFAULT_TIMEOUT  # how long revive waits for the mesh to be Ready again
        self.forwarded: dict[tuple[str, int], str] | None = None  # via_api_server: address -> pod
        self.group: ProcGroup | None = None
        self.opener: channel.Opener | None = None  # how the group reaches its procs (None: TCP)

    def elastic_info(self) -> tuple[str, int, int]:
        return self._run_id, self.restarts, self.max_restarts

    def _follow(self, mesh: Mapping[str, Any]) -> None:
        """Take the restart policy, limit and count as ``mesh`` has them now: a limit raised
        after RestartLimitReached (as its message says to) is what a respawned SPMD actor and
        the next lost proc's hint see."""
        spec, status = mesh.get("spec") or {}, mesh.get("status") or {}
        self.restart_policy = str(spec.get("restartPolicy") or contract.DEFAULT_RESTART_POLICY)
        self.max_restarts = int(spec.get("maxRestarts", contract.DEFAULT_MAX_RESTARTS))
        self.restarts = int(status.get("restarts") or 0)  # status.restarts when last seen

    def _where(self, index: int) -> str:
        return f"{self.api.namespace}/{self.name} rank {index} ({self.pod_names[index]})"

    def explain(self, index: int, reason: str, deadline: float, peer_left: bool = False) -> str:
        """Ask the API server how the proc's pod ended, while ``deadline`` (time.monotonic())
        allows, and at least once: the pod's status usually lags the dropped connection, so
        a call failing at once mostly says only that the proc is gone (and whether it will be
        restarted); a later one says it was restarted, once a new pod has replaced it.
        ``peer_left``: the proc's side ended the link (so it is not cut off, whatever its pod
        shows yet)."""
        name = self.pod_names[index]
        story = None
        pod: Mapping[str, Any] | None = None
        pod_deleted = False  # its pod being deleted (not a crash): an eviction, for a queued mesh
        pause = 0.01  # doubling to 0.2 s: a supervision report may wait a second for the status
        while True:
            try:
                pod = self.api.pod(name)
                pod_deleted = bool(((pod or {}).get("metadata") or {}).get("deletionTimestamp"))
                uid = ((pod or {}).get("metadata") or {}).get("uid")
                if uid and self.uids[index] and uid != self.uids[index]:
                    return self._restarted(index)
                story = assessing.explain_death(pod, name)
            except Exception:
                story = None
            if story is not None or time.monotonic() >= deadline:
                break
            time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
            pause = min(pause * 2, 0.2)
        while True:  # a queued mesh whose procs Kueue stopped: its status said why before they went
            try:
                mesh: Mapping[str, Any] | None = self.api.get_mesh(self.name)
            except MeshNotFound:
                mesh = None
            except Exception:
                mesh = {}
            # A queued mesh's pod deleted, and its status not saying why yet (the operator may
            # write it a moment later): read again while the deadline allows.
            if not mesh or not pod_deleted or assessing.queue_story(mesh) is not None \
                    or contract.KUEUE_QUEUE_LABEL not in ((mesh.get("metadata") or {}).get("labels") or {}) \
                    or time.monotonic() + 0.1 >= deadline:
                break
            time.sleep(0.1)
        deleting = assessing.deletion(mesh) if mesh else None
        if mesh is None or deleting is not None:  # no operator brings it back
            what = " was deleted" if mesh is None else f": {deleting}"
            return (f"proc {self._where(index)} is gone: {story or reason}; ProcMesh {self.api.namespace}/{self.name}"
                    f"{what}: its procs are gone for good; spawn or attach a new mesh")
        queued = assessing.queue_story(mesh) if mesh else None
        why = f"; {queued}" if queued else ""
        unended = assessing.unended_story(pod, name) if story is None and not queued and not peer_left else None
        if unended is not None:  # its pod runs on: no restart comes (the operator watches pods)
            node_lost = assessing.node_lost(mesh)  # unless its node is lost: the operator acts then
            hint = node_lost or reviving.unended_hint(self.api.namespace, name, self.restart_policy)
            return f"proc {self._where(index)} is unreachable: {reason}; {unended}; {hint}"
        if story is None and pod is not None and not queued:
            why += f"; {reviving.unknown_end_note(self.api.namespace, self.name, name)}"
        hint = reviving.lost_hint(mesh, queued is not None, self.restart_policy, self.restarts, self.max_restarts)
        return f"proc {self._where(index)} is gone: {story or reason}{why}; {hint}"

    def _restarted(self, index: int) -> str:
        try:
            self._follow(self.api.get_mesh(self.name))
        except Exception:
            pass  # the count as last seen
        return reviving.restarted_message(self._where(index), self.restart_policy, self.restarts, self.max_restarts)

    def restart_note(self, index: int) -> str:
        return reviving.restart_count(self.restart_policy, self.restarts, self.max_restarts)

    def _identify(self, index: int, address: tuple[str, int]) -> Mapping[str, Any] | None:
        """What proc ``index``'s server at ``address`` says it is, if it answers as that rank of
        this mesh."""
        assert self.group is not None
        try:
            who = identifying.identify_proc(address, self.group.token, timeout=PROBE_SECONDS, opener=self.opener)
        except Exception:
            return None
        return who if who.get("mesh") == self.name and who.get("rank") == index else None

    def _answers(self, index: int, address: tuple[str, int]) -> bool:
        """Whether proc ``index``'s server answers IDENTIFY at ``address`` as that rank of this
        mesh: a lost connection to a pod that was not replaced is either a dead proc whose pod
        status lags (refused: wait for its replacement) or a live one (reach it again at once)."""
        return self._identify(index, address) is not None

    def _restarted_says_proc(self, index: int, address: tuple[str, int], restarts: int) -> bool | None:
        """For a client that may not list pods: whether lost proc ``index``, answering at the
        address the status shows, is a new process (None: it does not answer yet). Its ``boot``
        decides (the same process keeps it, :mod:`~mesh_client._src.runtime.relinking`); where
        the lost connection never learnt it, the status's restart count."""
        assert self.group is not None
        who = self._identify(index, address)
        if who is None:
            return None
        before = self.group.peers[index].identity
        if before is not None:
            return not relinking.same_proc(before, who)
        return restarts > self.restarts

    def revive(self, indices: Sequence[int]) -> Mapping[int, Revived]:
        """Wait until the mesh is Ready with a new pod for every proc of ``indices`` whose
        connection was lost; each proc whose pod was replaced, at its new address, and each
        lost one whose pod is the same, Ready, and whose proc answers, where it is. A client
        that may not list pods asks each lost proc at the address the status shows: the same
        process (its boot id) is reached where it is, another one is a restarted proc."""
        assert self.group is not None
        deadline = time.monotonic() + self.timeout
        lost = {i for i in indices if self.group.peers[i].lost}
        while True:
            mesh = wait_ready(self.api, self.name, max(0.0, deadline - time.monotonic()))
            restarts = int(mesh["status"].get("restarts") or 0)
            entries = {int(p["rank"]): p for p in contract.status_procs(mesh)}
            pods = self.api.visible_pods(self.name)
            uids = reviving.pod_uids(pods, self.pod_names)
            ips = reviving.pod_ips(pods, self.pod_names)
            found: dict[int, Revived] = {}
            waiting = []
            for i in indices:
                listed = reviving.address_of(entries[i])
                address = listed or self.group.addresses[i]
                if self.forwarded is not None and listed is not None:
                    # The probes below port-forward to the pod serving ``address``: a restarted
                    # proc's new IP is only in the status (an old pod's, maybe another rank's,
                    # reused), and its pod keeps the rank's name.
                    self.forwarded[listed] = self.pod_names[i]
                if not (uids[i] and self.uids[i]):  # pods not listed (no permission, a huge mesh)
                    if i in lost:  # the proc itself says whether it is new, once it answers
                        new = self._restarted_says_proc(i, address, restarts)
                        if new is None:
                            waiting.append(i)
                        else:
                            found[i] = Revived(address, new, entries[i].get("podUID"))
                    continue
                replaced = uids[i] != self.uids[i]
                if replaced and not (reviving.describes_pod(listed, ips[i])
                                     and entries[i].get("podUID") in (None, uids[i])):
                    waiting.append(i)  # the status still names the old pod's address (or its proc)
                elif replaced:
                    found[i] = Revived(address, True, entries[i].get("podUID"))
                elif i in lost and uids[i] and entries[i].get("ready") and self._answers(i, address):
                    # the same pod's proc answers: only the connection broke
                    found[i] = Revived(address, False, entries[i].get("podUID"))
                elif i in lost:
                    waiting.append(i)  # its old pod is still there: its replacement is coming
            if not waiting:
                break
            if time.monotonic() >= deadline:
                unlisted = "" if pods is not None else (
                    " (this client may not list pods, so it waited for each to answer at the address "
                    "status.procs shows; granting it 'list pods' lets it follow the pods themselves)")
                raise MeshNotReady(
                    f"procs {[self._where(i) for i in waiting]} lost their connection and their pods were not "
                    f"replaced within {self.timeout:.0f} s (restartPolicy {self.restart_policy}){unlisted}; "
                    f"'procmesh describe {self.name} -n {self.api.namespace}' shows why", "NotRestarted")
            offloading.sleep(0.2)
        self._follow(mesh)
        for i, proc in found.items():
            self.uids[i] = uids[i]
            if self.forwarded is not None:
                self.forwarded[proc.address] = self.pod_names[i]
        return found

    def logging_mode(self, stream_to_client: bool, level: int) -> Callable[[], None]:
        """ProcMesh.logging_option: follow the pods' logs here, or stop; what each proc runs (the
        level only: pods print bare lines, this client prefixes what it reads)."""
        if stream_to_client and self.output is None:
            self.output = output.OutputForwarder(self.api, self.name, self.pod_names)
            self.output.start()
        elif not stream_to_client and self.output is not None:
            self.output.stop()
            self.output = None
        return functools.partial(logging_mode.apply, level, None)

    def stop(self, indices: Sequence[int], reason: str) -> None:
        """Disconnect; delete the ProcMesh only if this client created it."""
        if self.group is not None:
            for peer in self.group.peers:
                peer.close()
                peers.forget_peer(peer)
        if self.output is not None:
            self.output.stop()
        if self.lease is not None:
            self.lease.stop()
        if self.created:
            self.api.delete_mesh(self.name, uid=self.uid)


class ProgressLine:
    """One line on stderr, rewritten in place; :meth:`end` finishes it, so that what comes next
    (the result, an error, a Ctrl-C traceback) starts on a line of its own."""

    def __init__(self, show: bool) -> None:
        self.show = show
        self.last = ""

    def update(self, text: str) -> None:
        if self.show:
            line = f"\r{text}"
            print(line.ljust(len(self.last)), end="", file=sys.stderr, flush=True)
            self.last = line

    def end(self, text: str | None = None) -> None:
        if self.show and self.last:
            if text is not None:
                print(f"\r{text}".ljust(len(self.last) + 1), end="", file=sys.stderr)
            print(file=sys.stderr, flush=True)
        self.last = ""


def wait_ready(api: api_mod.KubeApi, name: str, timeout: float, progress: bool | None = None) -> dict[str, Any]:
    """Poll until Ready; raise MeshNotReady at once for fatal causes, or with the cause at timeout
    (an API server out of reach: :class:`ApiServerUnreachable` at timeout)."""
    line = ProgressLine(sys.stderr.isatty() if progress is None else progress)
    deadline = time.monotonic() + timeout
    delay = 0.05
    try:
        with interrupts.kept(before_raise=line.end):  # a Ctrl-C is never lost, and ends the line first
            while True:
                # Each request waits no longer than the wait has left; an API server out of reach
                # (restarting) is asked again until the deadline.
                try:
                    mesh = api.get_mesh(name, timeout=transport.time_left(deadline))
                    # Pods every time, also when the status says Ready: a status no operator keeps
                    # current (assessing.stale_status) must not send the client to procs that are
                    # gone. Not for a mesh too big to list its procs: listing 4,096 pods took 7 to
                    # 40 s on the test VM (20 MB, also in the API server's Table form), against
                    # attach's 1 s. Its status is still checked against its generation, the operator
                    # puts a stuck container in Ready, and a proc that is gone fails the connect,
                    # which then reads that pod's status.
                    size = math.prod(extent for _, extent in contract.mesh_dims(mesh.get("spec") or {}))
                    pods = api.visible_pods(name, timeout=transport.time_left(deadline)) \
                        if contract.lists_procs(size) else None
                except ApiServerUnreachable as exc:
                    if time.monotonic() >= deadline:
                        raise
                    line.update(f"ProcMesh {api.namespace}/{name}: {exc}; trying again")
                    offloading.sleep(delay)
                    delay = min(delay * 1.5, 0.5)
                    continue
                verdict = assessing.assess(mesh, pods)
                if verdict.ready:
                    line.end(f"ProcMesh {api.namespace}/{name}: {verdict.progress}")
                    return mesh
                if verdict.fatal:
                    raise MeshNotReady(f"ProcMesh {api.namespace}/{name} cannot become Ready: {verdict.problem}", verdict.reason)
                if time.monotonic() >= deadline:
                    raise MeshNotReady(
                        f"ProcMesh {api.namespace}/{name} was not Ready after {timeout:.0f} s: {verdict.problem} "
                        f"('procmesh describe {name} -n {api.namespace}' shows its conditions, events and what this "
                        f"client makes of them)",
                        verdict.reason,
                    )
                line.update(f"ProcMesh {api.namespace}/{name}: {verdict.progress}")
                offloading.sleep(delay)  # cut short when an attach_async's task is cancelled
                delay = min(delay * 1.5, 0.5)
    finally:
        line.end()  # before any traceback, Ctrl-C's included


def attached_uids(api: api_mod.KubeApi, name: str, pod_names: Sequence[str]) -> list[str | None]:
    """The uid of each proc's pod at attach, to tell a restart later. Not listed for a mesh too
    big to list its procs (4,096 pods took 7 to 44 s, against attach's 1 s): its uids stay
    unknown (None), and a lost proc then counts as restarted once ``status.restarts`` moves, as
    for a client that may not list pods."""
    if not contract.lists_procs(len(pod_names)):
        return [None] * len(pod_names)
    return reviving.pod_uids(api.visible_pods(name), pod_names)


def connect_mesh(
    api: api_mod.KubeApi,
    mesh: dict[str, Any],
    *,
    created: bool,
    bootstrap: Callable[[], Any] | None = None,
    via_api_server: bool = False,
    token: bytes | None = None,
    lease: lifetimes.LeaseRenewer | None = None,
    forward_output: bool | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> ProcMesh:
    """Build the proc mesh from a Ready resource: addresses, token, shape; connect; bootstrap.

    ``via_api_server`` reaches each proc by a port-forward through the API server instead of
    its pod IP. ``token``: the creator's own (it wrote the Secret); None reads the mesh's Secret.
    ``lease``: the creator's renewer, stopped when the mesh is. ``forward_output``: print what
    the procs print, prefixed with their rank (:mod:`.output`; None: on unless
    ``PROCMESH_FORWARD_OUTPUT=0``). ``timeout``: how long ``reconnect`` waits for restarted procs.
    """
    name = mesh["metadata"]["name"]
    spec = mesh["spec"]
    dims = [(d["name"], int(d["size"])) for d in spec.get("perHost") or []]
    shape = Shape([contract.HOSTS_DIM, *(n for n, _ in dims)], [int(spec.get(contract.HOSTS_DIM, 1)), *(s for _, s in dims)])
    procs = sorted(contract.status_procs(mesh), key=lambda p: p["rank"])
    if [p["rank"] for p in procs] != list(range(len(shape))):
        raise MeshNotReady(f"ProcMesh {api.namespace}/{name} status lists ranks {[p['rank'] for p in procs]}, expected 0..{len(shape) - 1}")
    addresses = [reviving.address_of(p) or ("", 0) for p in procs]
    if token is None:
        token = api.read_token(name, api_mod.token_secret_name(mesh))
    displays = [
        f"{api.namespace}/{name}[{','.join(f'{k}={v}' for k, v in point.items())}] (pod {p['pod']})"
        for point, p in zip(shape.points(), procs)
    ]
    owner = KubernetesProcs(api, mesh, [p["pod"] for p in procs], created, lease)
    owner.uids = attached_uids(api, name, owner.pod_names)
    owner.timeout = timeout
    opener = None
    if via_api_server:
        owner.forwarded = {a: p["pod"] for a, p in zip(addresses, procs)}
        opener = forwarding.port_forward_opener(api.api_client, api.namespace, owner.forwarded)
        owner.opener = opener
    elif not created:
        # An attached handle connects on its own (private peers): its stop() only disconnects,
        # and must not close the connections of another handle to the same mesh in this process
        # (the creator's, an earlier attach), nor set what their losses are explained with.
        opener = unixlinks.open_stream
    # Each proc's pod UID, its incarnation: what every handshake names (wire/binding.py), so an
    # address that another pod holds later cannot pass this client's handshakes on. None where
    # an older operator's status does not publish it: any proc of the mesh answers those.
    proc_ids = [p.get("podUID") or None for p in procs]
    group = ProcGroup(name, addresses, token, displays, owner=owner, opener=opener, proc_ids=proc_ids)
    group.bootstrap = bootstrap  # run again in a restarted proc (ProcMesh.reconnect)
    owner.group = group
    for index, peer in enumerate(group.peers):
        peer.explain_loss = lambda reason, deadline, i=index, p=peer: owner.explain(i, reason, deadline, p.peer_left)
    proc_mesh = ProcMesh(group, shape)
    for index, peer in enumerate(group.peers):
        try:
            peer.connect()
        except wire_errors.TokenRefused as exc:
            if created:  # its own token, which it just wrote: nothing about the Secret to say
                raise
            raise wire_errors.AuthenticationError(
                stale_tokens.refused(api.namespace, name, displays[index], api_mod.token_secret_name(mesh), exc)
            ) from None
    if output.enabled(forward_output):
        owner.output = output.OutputForwarder(api, name, [p["pod"] for p in procs])
        owner.output.start()
    if bootstrap is not None:
        proc_mesh.run(bootstrap).get()
    shutting_down.made(proc_mesh)
    natives.warn_if_missing()
    return proc_mesh


def attach(
    name: str,
    namespace: str | None = None,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    bootstrap: Callable[[], Any] | None = None,
    kubeconfig: str | None = None,
    context: str | None = None,
    api_client: Any = None,
    progress: bool | None = None,
    via_api_server: bool = False,
    forward_output: bool | None = None,
) -> ProcMesh:
    """The proc mesh of an existing ProcMesh resource, once it is Ready.

    Its extent is ``hosts`` followed by the ``perHost`` dimensions. ``stop()`` on it only
    disconnects: the resource belongs to whoever created it. ``via_api_server=True`` reaches the
    procs by port-forwards through the API server (needs ``create`` on ``pods/portforward``), for
    clients that cannot reach pod IPs. What the procs print shows on this program's stdout,
    prefixed ``[<mesh> rank <r>]``, unless ``forward_output=False`` (or
    ``PROCMESH_FORWARD_OUTPUT=0``).
    """
    client = api_client or api_mod.make_api_client(kubeconfig, context)
    api = api_mod.KubeApi(client, namespace or api_mod.default_namespace(kubeconfig, context))
    mesh = wait_ready(api, name, timeout, progress)
    return connect_mesh(api, mesh, created=False, bootstrap=bootstrap, via_api_server=via_api_server,
                        forward_output=forward_output, timeout=timeout)


async def attach_async(
    name: str,
    namespace: str | None = None,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    bootstrap: Callable[[], Any] | None = None,
    kubeconfig: str | None = None,
    context: str | None = None,
    api_client: Any = None,
    progress: bool | None = None,
    via_api_server: bool = False,
    forward_output: bool | None = None,
) -> ProcMesh:
    """:func:`attach` for async controllers: ``mesh = await attach_async("trainer")``.

    The wait runs on a thread of its own, so the event loop serves other tasks meanwhile;
    cancelling the awaiting task ends the wait (a mesh attached after all is disconnected)."""
    def blocking() -> ProcMesh:
        return attach(name, namespace, timeout=timeout, bootstrap=bootstrap, kubeconfig=kubeconfig, context=context,
                      api_client=api_client, progress=progress, via_api_server=via_api_server,
                      forward_output=forward_output)

    natives.warn_if_missing()  # here, at the caller's await: the attach runs on a thread of its own
    return await offloading.run_blocking(blocking, name=f"procmesh-attach-{name}", discard=lambda mesh: mesh.stop(),
                                         at_exit=True)
