"""Which proc a handshake is meant for, and which proc answers it, as pure functions.

Every proc of a mesh holds the same token, so the token alone proves nothing about *which*
proc answers: a listener at an address a client dials (a stale pod IP, a freed local port)
could pass the client's handshake on to any live proc of the mesh and keep the connection.
So the client names the proc it means in its AUTH, and the proc names itself in its WELCOME,
each inside the MAC of :mod:`.auth` (a relay can change neither), and :mod:`.protocol`
refuses a mismatch on both sides.

A proc is named by its *incarnation*: a random id that one run of one proc holds (the local
launcher draws one per process it starts, a pod's proc has its pod's UID), which the client
learns where it learns the address (the launcher, ``status.procs``, a pickled mesh). Another
proc, or a later run of the same one, has another. The proc's name (``trainer[3]``) travels
along for the messages only.
"""

from __future__ import annotations

import dataclasses

#: The longest incarnation id accepted (a pod UID has 36 characters, a local one 32).
MAX_INCARNATION = 64
#: Names are cut to this many bytes on the wire (they only go into messages).
MAX_NAME_BYTES = 200


@dataclasses.dataclass(frozen=True)
class ProcId:
    """One run of one proc: ``incarnation`` decides, ``name`` tells the user which."""

    incarnation: str
    name: str

    def __post_init__(self) -> None:
        check_incarnation(self.incarnation)

    def __str__(self) -> str:
        return f"{self.name} (incarnation {self.incarnation})"


def check_incarnation(incarnation: str) -> None:
    """Raise ValueError unless ``incarnation`` is 1..64 printable ASCII characters without spaces."""
    if not 0 < len(incarnation) <= MAX_INCARNATION or not all("!" <= ch <= "~" for ch in incarnation):
        raise ValueError(
            f"a proc's incarnation id must be 1 to {MAX_INCARNATION} printable ASCII characters without "
            f"spaces (PROCMESH_INCARNATION, status.procs[].incarnation); got {incarnation!r}")


def encode(proc: ProcId | None) -> bytes:
    """What goes on the wire (and into the MAC) for ``proc``; empty for "any proc of the mesh"."""
    if proc is None:
        return b""
    name = proc.name.encode("utf-8")[:MAX_NAME_BYTES].decode("utf-8", "ignore")
    return f"{proc.incarnation} {name}".encode()


def decode(blob: bytes) -> ProcId | None:
    """The proc named by ``blob`` (None when empty); ValueError when malformed."""
    if not blob:
        return None
    incarnation, _, name = blob.decode("utf-8", "replace").partition(" ")
    return ProcId(incarnation, name)


def answers_for(meant: ProcId | None, own: ProcId | None) -> bool:
    """Whether the proc ``own`` may answer a handshake meant for ``meant`` (None: any proc)."""
    return meant is None or (own is not None and own.incarnation == meant.incarnation)


#: How every refusal of :func:`refusal` starts (a client tells it from other REJECTs by it).
REFUSAL = b"this connection was meant for proc "


def refusal(meant: ProcId, own: ProcId | None) -> str:
    """Why a proc refuses a handshake meant for another one (a proc's REJECT, and a client's
    error when the wrong proc answers): it names both."""
    who = str(own) if own is not None else "a proc that does not say which it is"
    return (f"{REFUSAL.decode()}{meant}, but it reached {who}: the address is stale (that proc "
            f"ended or moved) or something there passed the handshake on; the client must learn the proc's "
            f"current address (ProcMesh.reconnect(), or attach again)")
