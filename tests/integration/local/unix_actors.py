"""Actors for the unix-link tests: they report how their own proc reaches other procs."""

from __future__ import annotations

import socket

from mesh_client import Actor, endpoint


class LinkReporter(Actor):
    """Calls a mesh it was handed and says over which address family each of its procs was reached."""

    @endpoint
    def families(self, other) -> list[str]:
        other.echo.call("hello").get()
        return [_family(peer) for peer in other._group.peers]

    @endpoint
    def unix_directory(self) -> str | None:
        from mesh_client._src.runtime import unixlinks

        return unixlinks.directory()


def _family(peer) -> str:
    sock = peer._channel.stream.get_extra_info("socket")
    return socket.AddressFamily(sock.family).name
