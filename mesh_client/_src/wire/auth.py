"""The mutual challenge-response that opens every connection, as pure functions.

The token never crosses the wire: each side proves it holds the token by a keyed MAC over both
nonces, with a different label per direction so that a reply cannot be reflected.
"""

from __future__ import annotations

import hashlib
import hmac

NONCE_BYTES = 32
MAC_BYTES = 32


def client_mac(token: bytes, server_nonce: bytes, client_nonce: bytes) -> bytes:
    """What the client sends to prove it holds ``token``."""
    return hmac.new(token, b"procmesh/client/" + server_nonce + client_nonce, hashlib.sha256).digest()


def server_mac(token: bytes, server_nonce: bytes, client_nonce: bytes) -> bytes:
    """What the server answers to prove it holds ``token`` too."""
    return hmac.new(token, b"procmesh/server/" + server_nonce + client_nonce, hashlib.sha256).digest()


def verify(expected: bytes, received: bytes) -> bool:
    """Constant-time comparison of MACs."""
    return hmac.compare_digest(expected, received)
