"""Monarch's ``enable_transport``: the transports a program may ask for, and which we honour.

procmesh has one wire (:mod:`mesh_client._src.wire`): TCP between hosts, and AF_UNIX between the
processes of one controller on one host (:mod:`.unixlinks`), every connection authenticated with
the mesh token. Monarch's ``"tcp"`` (TcpWithHostname, TcpWithLocalhost) and ``"ipc"`` (Unix) name
what that wire does, so enabling either is accepted; Monarch's rule that one transport holds
for the life of the process is kept. TLS, QUIC, Meta's TLS, the in-process ``Local`` channel and
an explicit ``tcp://host:port`` for the client are refused, saying what we use instead.
"""

from __future__ import annotations

import enum
import threading


class ChannelTransport(enum.Enum):
    """Monarch's channel transports (the names of ``monarch.actor.ChannelTransport``)."""

    Local = "local"
    MetaQuicWithHostname = "metaquic-hostname"
    MetaQuicWithIpV6 = "metaquic"
    MetaTlsWithHostname = "metatls-hostname"
    MetaTlsWithIpV6 = "metatls"
    Quic = "quic"
    TcpWithHostname = "tcp"
    TcpWithLocalhost = "tcp-localhost"
    Tls = "tls"
    Unix = "ipc"


#: Monarch's string shortcuts.
_SHORTCUTS = {
    "tcp": ChannelTransport.TcpWithHostname,
    "ipc": ChannelTransport.Unix,
    "metatls": ChannelTransport.MetaTlsWithIpV6,
    "metatls-hostname": ChannelTransport.MetaTlsWithHostname,
    "tls": ChannelTransport.Tls,
}
#: What our wire is: TCP, and AF_UNIX within a host.
HONOURED = frozenset({ChannelTransport.TcpWithHostname, ChannelTransport.TcpWithLocalhost, ChannelTransport.Unix})
OUR_WIRE = ("procmesh's wire is TCP between hosts and AF_UNIX between the processes of one host, every "
            "connection authenticated with the mesh token (PROCMESH_TOKEN)")

_enabled: ChannelTransport | None = None
_lock = threading.Lock()


def resolve(transport: ChannelTransport | str) -> ChannelTransport:
    """The transport a Monarch argument names, if we can honour it; raises saying why not."""
    if isinstance(transport, ChannelTransport):
        chosen = transport
    elif isinstance(transport, str) and transport in _SHORTCUTS:
        chosen = _SHORTCUTS[transport]
    elif isinstance(transport, str) and "://" in transport:
        raise NotImplementedError(
            f"enable_transport({transport!r}): the client does not listen at an address of your choosing here; "
            f"{OUR_WIRE}: call enable_transport('tcp') or leave it out")
    else:
        raise ValueError(f"enable_transport({transport!r}): not a transport; Monarch's are "
                         f"{', '.join(sorted(_SHORTCUTS))} or a ChannelTransport")
    if chosen not in HONOURED:
        raise NotImplementedError(
            f"enable_transport({transport!r}): {chosen.name} is not available: {OUR_WIRE}; "
            f"use 'tcp' or 'ipc' (both select it)")
    return chosen


def enable_transport(transport: ChannelTransport | str) -> None:
    """Monarch's ``enable_transport``: accept ``"tcp"`` or ``"ipc"`` (what our wire does) and
    refuse the rest with the reason; one transport per process, as in Monarch (enabling the same
    one again is fine)."""
    global _enabled
    chosen = resolve(transport)
    with _lock:
        if _enabled is not None and _enabled is not chosen:
            raise RuntimeError(
                f"Only one transport type may be enabled at one time. Currently enabled transport type is "
                f"`{_enabled.name}`. Attempted to enable transport type `{chosen.name}`.")
        _enabled = chosen


def enabled() -> ChannelTransport | None:
    """What :func:`enable_transport` chose, if it was called."""
    return _enabled
