"""Which address the SPMD master advertises: Monarch's ``use_ipaddr`` (``AddrType``).

Monarch's ``SPMDActor.get_host_port(use_ipaddr)`` gives the master's hostname when
``use_ipaddr`` is None, else an IP of the asked family resolved from that hostname (``Default``:
IPv6, then IPv4). Ours differs for None only: it gives the address the proc server listens on
(the pod IP on Kubernetes), which every proc of the mesh reaches, where a pod's hostname need not
resolve. With a family, the proc's own address is taken if it is of that family, else the
hostname's, in Monarch's order. Used by :mod:`.actor`.
"""

from __future__ import annotations

import enum
import ipaddress
import socket


class AddrType(enum.Enum):
    """The address family to advertise (as ``monarch.tools.network.AddrType``)."""

    Default = enum.auto()  # IPv6 if there is one, else IPv4
    IPv4 = enum.auto()
    IPv6 = enum.auto()


_FAMILIES = {
    AddrType.Default: (socket.AF_INET6, socket.AF_INET),
    AddrType.IPv4: (socket.AF_INET,),
    AddrType.IPv6: (socket.AF_INET6,),
}


def _family_of(address: str) -> socket.AddressFamily | None:
    try:
        return socket.AF_INET6 if ipaddress.ip_address(address).version == 6 else socket.AF_INET
    except ValueError:
        return None


def _resolve(hostname: str, family: socket.AddressFamily) -> str | None:
    try:
        infos = socket.getaddrinfo(hostname, None, family, socket.SOCK_STREAM)
    except OSError:
        return None
    return str(infos[0][4][0]) if infos else None


def master_address(own: str, hostname: str, use_ipaddr: AddrType | None) -> str:
    """The address to advertise for a proc listening on ``own``, on host ``hostname``."""
    if use_ipaddr is None:
        return own
    if not isinstance(use_ipaddr, AddrType):
        raise TypeError(
            f"use_ipaddr={use_ipaddr!r}: give None (the proc's own address) or a "
            "mesh_client.spmd.AddrType (Default, IPv4 or IPv6)"
        )
    for family in _FAMILIES[use_ipaddr]:
        if _family_of(own) == family:
            return own
        resolved = _resolve(hostname, family)
        if resolved is not None:
            return resolved
    raise RuntimeError(
        f"no {use_ipaddr.name} address for this proc: it listens on {own} and {hostname!r} resolves to none; "
        "pass use_ipaddr=None to advertise the address it listens on"
    )
