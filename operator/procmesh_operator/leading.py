"""One active replica: leader election on a ``coordination.k8s.io/v1`` Lease.

Every replica watches (its stores stay warm), only the Lease's holder reconciles. The rules are
client-go's ``leaderelection``: the holder renews ``spec.renewTime`` every ``retry`` seconds; a
follower takes the Lease once it has seen the same record unchanged for ``leaseDurationSeconds`` of
its own clock (never comparing its clock with the holder's), or at once when the holder let it go;
every write is a replace on the resourceVersion just read, so of two replicas racing for it one
wins. A holder that has not renewed for ``renew_deadline`` (shorter than the duration, so it stops
before anyone may take over; each read and write is bounded by that deadline) stops acting and its
process exits (``on_lost``): the kubelet starts it again as a follower. On a graceful stop the
holder releases the Lease (empty holder, duration 1 s), so a replacement takes it at once instead
of after a whole duration; a stopping replica takes no Lease up while it drains.

Why not kopf's peering: kopf pauses its own watches while another replica is active, and
nothing pauses the operator's own pod watch (:mod:`.podwatch`), queue and resync, so under
peering the pod watch was kopf's and a replica paused after acting went on reconciling from its
resync. Used by :mod:`.reconciling` (its queue waits on :meth:`Elector.wait_leading`), made by
:mod:`.__main__` from ``--leader-election``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from procmesh_operator import kubeclient, metrics

logger = logging.getLogger("procmesh_operator.leading")

#: What :func:`decide` asks of the elector.
CREATE, RENEW, TAKE, WAIT = "create", "renew", "take", "wait"


@dataclasses.dataclass(frozen=True)
class Election:
    """Where the Lease is, who this replica is, and its timing (client-go's defaults: 15, 10,
    2 s; ``renew_deadline`` < ``lease_seconds``)."""

    namespace: str
    name: str
    identity: str
    lease_seconds: float = 15.0

    @property
    def renew_deadline(self) -> float:
        return self.lease_seconds * 2 / 3

    @property
    def retry_seconds(self) -> float:
        return self.lease_seconds / 7.5


def lease_path(namespace: str, name: str | None = None) -> str:
    base = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
    return f"{base}/{name}" if name else base


def holder_of(lease: Mapping[str, Any] | None) -> str:
    """The Lease's holder ("" when none or released)."""
    return str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")


def record_of(lease: Mapping[str, Any] | None) -> tuple[str, str, int]:
    """What a follower compares between two reads: holder, renewTime and transitions (a
    holder alive changes renewTime at every renewal)."""
    spec = (lease or {}).get("spec") or {}
    return (holder_of(lease), str(spec.get("renewTime") or ""),
            int(spec.get("leaseTransitions") or 0))


def decide(lease: Mapping[str, Any] | None, identity: str, unchanged_for: float,
           default_seconds: float) -> str:
    """What to do with the Lease as just read: CREATE it, RENEW it (ours), TAKE it (released,
    or its record unchanged for its whole duration as this replica's clock measures), or WAIT.
    ``unchanged_for``: seconds since this replica first saw the current record."""
    if lease is None:
        return CREATE
    holder = holder_of(lease)
    if holder == identity:
        return RENEW
    if not holder:
        return TAKE
    seconds = float((lease.get("spec") or {}).get("leaseDurationSeconds") or default_seconds)
    return TAKE if unchanged_for >= seconds else WAIT


def _micro_time(now: float) -> str:
    """A MicroTime (RFC 3339 with microseconds, UTC)."""
    stamp = datetime.datetime.fromtimestamp(now, datetime.timezone.utc)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def lease_body(election: Election, lease: Mapping[str, Any] | None, action: str,
               now: float) -> dict[str, Any]:
    """The Lease to write for ``action`` (CREATE, RENEW or TAKE) onto ``lease`` as read (its
    resourceVersion is the write's precondition)."""
    spec = dict((lease or {}).get("spec") or {})
    stamp = _micro_time(now)
    if action != RENEW:
        spec["acquireTime"] = stamp
        spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + (action == TAKE)
    spec.update(holderIdentity=election.identity, renewTime=stamp,
                leaseDurationSeconds=max(1, round(election.lease_seconds)))
    metadata: dict[str, Any] = {"name": election.name, "namespace": election.namespace}
    version = ((lease or {}).get("metadata") or {}).get("resourceVersion")
    if version:
        metadata["resourceVersion"] = version
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": metadata,
            "spec": spec}


class Elector:
    """Holds or waits for the Lease of ``election`` through ``client`` (its own, closed by
    :meth:`stop`); ``on_lost`` is called (once) when a held Lease could not be renewed in time
    or was taken."""

    def __init__(self, client: kubeclient.KubeClient, election: Election,
                 on_lost: Callable[[], None]) -> None:
        self.client = client
        self.election = election
        self.on_lost = on_lost
        self._renewed: float | None = None  # monotonic time the last successful write was sent
        self._held = False
        self._seen: tuple[tuple[str, str, int], float] | None = None  # record, first seen
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._retired = False  # stopping: renews a held Lease, takes none up

    def leading(self) -> bool:
        """Held, and renewed within the renew deadline."""
        return (self._held and self._renewed is not None
                and time.monotonic() - self._renewed < self.election.renew_deadline)

    async def wait_leading(self) -> None:
        """Return once this replica leads (at once while it does)."""
        while not self.leading():
            self._changed.clear()
            await self._changed.wait()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    def retire(self) -> None:
        """Take no Lease up from now on (a replica stopping: it drains its reconciles, then
        :meth:`stop` releases what it holds)."""
        self._retired = True

    async def stop(self) -> None:
        """Stop electing; a held Lease is released (after the caller's last reconcile)."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self.leading():
            await self._release()
        await self.client.close()

    def _deadline_left(self) -> float:
        """Seconds until a held Lease's renew deadline (the renew deadline for a follower)."""
        if not self._held or self._renewed is None:
            return self.election.renew_deadline
        return self._renewed + self.election.renew_deadline - time.monotonic()

    async def _run(self) -> None:
        path = lease_path(self.election.namespace, self.election.name)
        while True:
            try:
                if not self._held or self.leading():  # resumed past the deadline: lost
                    # Bounded by the deadline, as client-go's renewals: a read or write that
                    # hangs cannot keep a holder believing it leads.
                    await asyncio.wait_for(self.attempt(path), max(0.1, self._deadline_left()))
            except asyncio.TimeoutError:
                logger.warning("leader election: the Lease %s/%s did not answer in time",
                               self.election.namespace, self.election.name)
            except kubeclient.ApiError as e:
                if not e.conflict:  # a conflict: someone wrote first; read again next time
                    logger.warning("leader election: Lease %s/%s: %s", self.election.namespace,
                                   self.election.name, e)
            except Exception as e:  # noqa: BLE001 - the API away: retried, the deadline rules
                logger.warning("leader election: %s", e)
            if self._held and not self.leading():
                self._held = False
                metrics.LEADER.set(0)
                logger.error("lost the Lease %s/%s (not renewed within %.0f s, or taken): "
                             "this replica stops acting", self.election.namespace,
                             self.election.name, self.election.renew_deadline)
                self.on_lost()
                return
            # Wake for the deadline too, should a renewal be due after it.
            await asyncio.sleep(min(self.election.retry_seconds, max(0.0, self._deadline_left())))

    async def attempt(self, path: str) -> str:
        """One read and, if due, one write of the Lease; the action taken."""
        lease = await self.client.get_or_none(path)
        now = time.monotonic()
        record = record_of(lease)
        if self._seen is None or self._seen[0] != record:
            self._seen = (record, now)
        action = decide(lease, self.election.identity, now - self._seen[1],
                        self.election.lease_seconds)
        if self._retired and action in (CREATE, TAKE):
            action = WAIT
        if action == WAIT:
            if self._held:  # someone else holds it now
                self._renewed = None
            return action
        body = lease_body(self.election, lease, action, time.time())
        sent = time.monotonic()  # the renewal counts from before the write: a slow answer
        # must not stretch this replica's term past what a follower measures from the commit
        if action == CREATE:
            await self.client.create(lease_path(self.election.namespace), body)
        else:
            await self.client.replace(path, body)
        if not self._held:
            logger.info("leading: holds the Lease %s/%s as %s", self.election.namespace,
                        self.election.name, self.election.identity)
        self._held, self._renewed = True, sent
        metrics.LEADER.set(1)
        self._changed.set()
        return action

    async def _release(self) -> None:
        """Give the Lease up (empty holder, 1 s), so a replacement takes it at once."""
        path = lease_path(self.election.namespace, self.election.name)
        self._held = False
        metrics.LEADER.set(0)
        try:
            lease = await self.client.get(path)
            if holder_of(lease) != self.election.identity:
                return
            spec = dict(lease.get("spec") or {})
            spec.update(holderIdentity="", leaseDurationSeconds=1)
            await self.client.replace(path, {**lease, "spec": spec})
            logger.info("released the Lease %s/%s", self.election.namespace, self.election.name)
        except Exception as e:  # noqa: BLE001 - it then expires after its duration
            logger.warning("could not release the Lease (it expires instead): %s", e)
