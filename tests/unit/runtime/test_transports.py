"""Monarch's enable_transport over procmesh's one wire.

Aspects: "tcp" and "ipc" (and their ChannelTransport members) are accepted, since our wire is
TCP with AF_UNIX within a host; TLS, QUIC, Meta's transports, Local and an explicit client
address are refused saying what we use; a name that is no transport is a ValueError; one
transport per process, the same one again being fine (Monarch's rule).
"""

import pytest

from mesh_client import ChannelTransport, enable_transport
from mesh_client._src.runtime import transports


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    monkeypatch.setattr(transports, "_enabled", None)


@pytest.mark.parametrize("transport", ["tcp", "ipc", ChannelTransport.Unix, ChannelTransport.TcpWithHostname,
                                       ChannelTransport.TcpWithLocalhost])
def test_what_our_wire_does_is_accepted(transport):
    enable_transport(transport)
    enable_transport(transport)  # again: fine
    assert transports.enabled() == transports.resolve(transport)


@pytest.mark.parametrize("transport", ["tls", "metatls", "metatls-hostname", ChannelTransport.Quic, ChannelTransport.Local])
def test_other_transports_are_refused_saying_what_we_use(transport):
    with pytest.raises(NotImplementedError, match="TCP between hosts and AF_UNIX.*use 'tcp' or 'ipc'"):
        enable_transport(transport)
    assert transports.enabled() is None


def test_an_explicit_client_address_is_refused():
    with pytest.raises(NotImplementedError, match="does not listen at an address of your choosing"):
        enable_transport("tcp://127.0.0.1:8080")


def test_a_name_that_is_no_transport():
    with pytest.raises(ValueError, match="not a transport"):
        enable_transport("carrier-pigeon")


def test_one_transport_per_process():
    enable_transport("ipc")
    with pytest.raises(RuntimeError, match="Only one transport type may be enabled at one time"):
        enable_transport("tcp")
