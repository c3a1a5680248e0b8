"""The wire protocol's version, exchanged in the handshake, and what a mismatch tells the user.

Framing alone does not make two procmesh releases compatible: the requests' headers, the ops and
the pickled classes change between them, and a client talking to an older proc-server image
would fail later with an unpickling error nobody can act on. So each handshake frame carries its
sender's :data:`PROTOCOL_VERSION` in the frame header's 16-bit field (:mod:`.frames`), which
releases before versions sent as 0 and ignore: :mod:`.protocol` compares it before anything is
unpickled, the client on HELLO, the server on AUTH (after the token was proved, so a stranger
learns nothing but that its token is wrong). An older client is refused with a REJECT whose
reason it prints; a newer client raises :class:`~.errors.VersionMismatch` itself.

Bump :data:`PROTOCOL_VERSION` whenever a message's meaning changes (an op, a header tuple, a
pickled class the other side must know).
"""

from __future__ import annotations

import functools
import importlib.metadata

#: This release's wire protocol; 0 is what releases before protocol versions sent.
# 2: request and reply envelopes start with a fixed struct (wire/envelopes.py); the READ_ONLY
# flag in segment lengths (wire/frames.py); out-of-band bytearrays (wire/serialization.py).
# 3: a failure's exception travels as a pickle of its own inside it (actor/messages.py).
# 4: a failure says whether Port.exception sent it (actor/messages.py); PORT_SEND carries a rank.
# 5: a pickled actor mesh carries its endpoints' argument checks (actor/signatures.py); STOP a reason.
# 6: AUTH names the proc the client means and WELCOME the proc that answers, inside their MACs
# (wire/binding.py); an older peer would pass a relayed handshake on, so it is refused instead.
PROTOCOL_VERSION = 6


@functools.cache
def release() -> str | None:
    """The installed procmesh distribution's version ("0.1.0"), or None when not installed."""
    try:
        return importlib.metadata.version("procmesh")
    except importlib.metadata.PackageNotFoundError:
        return None


def software() -> str:
    """"procmesh 0.1.0", for the messages."""
    return f"procmesh {release() or '(version unknown: not installed as a distribution)'}"


def describe(version: int) -> str:
    """"protocol 1", or what a 0 means."""
    if version == 0:
        return "no protocol version (a procmesh release from before protocol versions)"
    return f"protocol {version}"


def client_mismatch(server: int, client: int) -> str:
    """Why a client gives up on a proc server that speaks ``server``."""
    return (f"procmesh wire protocol mismatch: the proc server speaks {describe(server)}, this client "
            f"({software()}) speaks {describe(client)}: run the proc-server image built from this client's "
            f"procmesh version (procmesh/proc-server:{release() or '<that version>'}), or install in the client the procmesh "
            f"version of the proc-server image")


def server_mismatch(client: int, server: int) -> str:
    """Why a proc server refuses a client that speaks ``client`` (sent in the REJECT)."""
    return (f"procmesh wire protocol mismatch: the client speaks {describe(client)}, this proc server "
            f"({software()}) speaks {describe(server)}: install in the client the procmesh version of the "
            f"proc-server image, or run the proc-server image built from the client's procmesh version")
