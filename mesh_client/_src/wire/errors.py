"""Errors raised by the wire layer; the runtime maps them to connection failures."""

from __future__ import annotations


class WireError(Exception):
    """Base class of everything the wire layer raises."""


class ProtocolError(WireError):
    """The peer sent bytes that are not a valid frame in the current state."""


class FrameTooLarge(ProtocolError):
    """A frame header announced more bytes than this side accepts."""


class AuthenticationError(WireError):
    """The peer did not prove it holds the mesh token, or refused ours."""


class TokenRefused(AuthenticationError):
    """The proc server said our token is not its mesh's (not a handshake cut short, nor a
    server that failed to prove itself): the one refusal a changed Secret explains."""


class WrongProc(AuthenticationError):
    """The handshake was meant for another proc, or another run of it (:mod:`.binding`): the
    address is stale, or something there relayed it. The message names both procs."""


class VersionMismatch(ProtocolError):
    """The peer speaks another wire protocol version (:mod:`.versions`); the message names both."""


class MessageTooLarge(WireError, ValueError):
    """A message bigger than its receiver accepts (its ``PROCMESH_MAX_MESSAGE_BYTES``): refused
    in the sender, before a byte is sent, so the connection and its other calls live on."""
