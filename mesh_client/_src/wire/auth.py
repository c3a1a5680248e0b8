"""The mutual challenge-response that opens every connection, as pure functions.

The token never crosses the wire: each side proves it holds the token by a keyed MAC over both
nonces, with a different label per direction so that a reply cannot be reflected. The MACs also
cover which proc the client means and which proc answers (:mod:`.binding`): the token is the
mesh's, shared by all its procs, so without them a relay could hand one proc's handshake to another.
"""

from __future__ import annotations

import hashlib
import hmac

NONCE_BYTES = 32
MAC_BYTES = 32


def client_mac(token: bytes, server_nonce: bytes, client_nonce: bytes, meant: bytes = b"") -> bytes:
    """What the client sends to prove it holds ``token``, for the proc ``meant`` (encoded by
    :func:`.binding.encode`; the nonces have fixed sizes, so the input splits one way only)."""
    return hmac.new(token, b"procmesh/client/" + server_nonce + client_nonce + meant, hashlib.sha256).digest()


def server_mac(token: bytes, server_nonce: bytes, client_nonce: bytes, own: bytes = b"") -> bytes:
    """What the server answers to prove it holds ``token`` too, as the proc ``own``."""
    return hmac.new(token, b"procmesh/server/" + server_nonce + client_nonce + own, hashlib.sha256).digest()


def verify(expected: bytes, received: bytes) -> bool:
    """Constant-time comparison of MACs."""
    return hmac.compare_digest(expected, received)
