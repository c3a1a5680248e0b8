"""Actors for the unix-link tests: they report how their own proc reaches other procs."""

from __future__ import annotations

import socket

from mesh_client import Actor, endpoint


class LinkReporter(Actor):
    """Calls a mesh it was handed and says over which address family each of its procs was reached."""

    @endpoint
    def families(self, other) -> list[str]:
        return _families(other)

    @endpoint
    def unix_directory(self) -> str | None:
        from mesh_client._src.runtime import unixlinks

        return unixlinks.directory()


    @endpoint
    def nested_links(self) -> dict:
        """Start procs from this proc and say how it reaches them, and where their sockets are."""
        from mesh_client import this_host
        from mesh_client._src.runtime import unixlinks
        from tests.integration.local.actors import Recorder

        with this_host().spawn_procs(per_host={"procs": 1}, name="unix_nested") as nested:
            recorders = nested.spawn("unix_nested_rec", Recorder)
            families = _families(recorders)
            inner = recorders.slice(procs=0).where.call_one().get()
            return {"families": families, "path": unixlinks.path_for(nested._group.addresses[0]),
                    "directory": unixlinks.directory(), "inner_pid": inner["pid"]}


def _families(other) -> list[str]:
    other.echo.call("hello").get()
    return [_family(peer) for peer in other._group.peers]


def _family(peer) -> str:
    sock = peer._channel.stream.get_extra_info("socket")
    return socket.AddressFamily(sock.family).name
