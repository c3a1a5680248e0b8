"""Monarch's ``use_ipaddr``: which address the SPMD master advertises.

Aspects: None gives the proc's own address; a family takes the proc's own address when it is of
that family, else the hostname's (Default: IPv6, then IPv4); no address of the family, or a value
that is not an AddrType, is refused with the fix. Hostnames are numeric, so resolution is real
and needs no network.
"""

import pytest

from mesh_client._src.spmd.addresses import master_address
from mesh_client.spmd import AddrType


def test_none_is_the_address_the_proc_listens_on():
    assert master_address("10.0.0.7", "127.0.0.1", None) == "10.0.0.7"


def test_the_own_address_when_it_is_of_the_family():
    assert master_address("10.0.0.7", "::1", AddrType.IPv4) == "10.0.0.7"
    assert master_address("fd00::7", "127.0.0.1", AddrType.IPv6) == "fd00::7"
    assert master_address("fd00::7", "127.0.0.1", AddrType.Default) == "fd00::7"


def test_else_the_hostname_resolved_in_monarchs_order():
    assert master_address("10.0.0.7", "::1", AddrType.IPv6) == "::1"
    assert master_address("10.0.0.7", "::1", AddrType.Default) == "::1"  # IPv6 first
    assert master_address("fd00::7", "127.0.0.1", AddrType.IPv4) == "127.0.0.1"
    assert master_address("10.0.0.7", "127.0.0.1", AddrType.Default) == "10.0.0.7"  # no IPv6: IPv4


def test_no_address_of_the_family_is_refused():
    with pytest.raises(RuntimeError, match="no IPv6 address for this proc.*use_ipaddr=None"):
        master_address("10.0.0.7", "127.0.0.1", AddrType.IPv6)


def test_a_value_that_is_not_an_addrtype_is_refused():
    with pytest.raises(TypeError, match="mesh_client.spmd.AddrType"):
        master_address("10.0.0.7", "127.0.0.1", "ipv4")
