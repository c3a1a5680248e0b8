"""Each handshake is bound to the proc its client meant (wire/binding.py), through a real relay.

A relay here is what a listener at an address a client dials could be (a stale pod IP, a local
proc's freed port bound by another user): a TCP forwarder on 127.0.0.1 that passes the bytes on,
unchanged, to a live proc of the same mesh.

Aspects: relayed to another proc of the mesh, the handshake is refused by that proc (its REJECT
names the proc meant and itself) and by the client (no call goes through, for a one-shot
IDENTIFY and for a peer's connection), and the proc closes the relayed connection; relayed to a
new incarnation of the proc meant (after a restart) it is refused too, naming both incarnations,
while ``reconnect()`` picks up the new incarnation with the new address and calls go on; relayed
to the proc meant, it passes (a forwarder in between, as a port-forward is, is no relay attack);
the binding costs the handshake only: a proc's sends to a port build the proc they mean once.
"""

import os
import signal

import pytest

from mesh_client import Actor, Channel, Port, SupervisionError, endpoint, this_host
from mesh_client._src.runtime import identifying, peers
from mesh_client._src.wire import binding
from tests.integration.local.actors import Recorder
from tests.integration.local.forwarder import TIMEOUT, Relay, refused_through


def meant(mesh, index):
    group = mesh._group
    return peers.meaning(group.proc_ids[index], group.displays[index])


def test_a_handshake_relayed_to_another_proc_of_the_mesh_is_refused_on_both_sides(procs):
    group = procs._group
    for connect in (
        lambda address: identifying.identify_proc(address, group.token, timeout=TIMEOUT, meant=meant(procs, 0)),
        lambda address: peers.Peer(address, group.token, group.displays[0], meant=meant(procs, 0)).connect(),
    ):
        text, from_proc = refused_through(group.addresses[1], connect)
        assert (f"the proc server refused the connection: this connection was meant for proc "
                f"{group.displays[0]} (incarnation {group.proc_ids[0]}), but it reached "
                f"{group.displays[1]} (incarnation {group.proc_ids[1]})") in text
        assert b"this connection was meant for proc" in from_proc  # said in the proc's REJECT


def test_a_handshake_relayed_to_the_proc_meant_passes(procs):
    group = procs._group
    relay = Relay(group.addresses[1])
    try:
        who = identifying.identify_proc(relay.address, group.token, timeout=TIMEOUT, meant=meant(procs, 1))
    finally:
        relay.close()
    assert who["incarnation"] == group.proc_ids[1] and who["rank"] == 1


def test_a_handshake_relayed_to_a_new_incarnation_is_refused_and_reconnect_learns_it():
    with this_host().spawn_procs(per_host={"gpus": 2}, name="incarnations") as mesh:
        rec = mesh.spawn("rec", Recorder)
        group = mesh._group
        old = meant(mesh, 1)
        os.kill(rec.slice(gpus=1).where.call_one().get()["pid"], signal.SIGKILL)
        with pytest.raises(SupervisionError):
            rec.slice(gpus=1).echo.call_one(1).get(timeout=TIMEOUT)
        assert mesh.reconnect() == [1]
        assert group.proc_ids[1] != old.incarnation  # learnt with the new address
        assert mesh.spawn("fresh", Recorder).slice(gpus=1).echo.call_one(2).get(timeout=TIMEOUT) == 2

        # What held the old address passes it on to the new process.
        text, _ = refused_through(group.addresses[1], lambda address: identifying.identify_proc(
            address, group.token, timeout=TIMEOUT, meant=old))
        assert (f"meant for proc incarnations[gpus=1] (incarnation {old.incarnation}), but it reached "
                f"incarnations[gpus=1] (incarnation {group.proc_ids[1]})") in text


class Sender(Actor):
    """Sends to a port of the controller, counting the proc ids its process builds meanwhile."""

    @endpoint
    def send(self, port: Port[int], value: int) -> None:
        port.send(value)

    @endpoint
    def send_counting(self, port: Port[int], values: list[int]) -> int:
        built = []
        check = binding.check_incarnation
        binding.check_incarnation = lambda incarnation: (built.append(incarnation), check(incarnation))[1]
        try:
            for value in values:
                port.send(value)
        finally:
            binding.check_incarnation = check
        return len(built)


def test_a_procs_sends_to_a_port_build_the_proc_they_mean_once_not_per_send(procs):
    """A port sent to a proc names the proc of its home (its incarnation id) in the handshake;
    each send looks its peer up again, and that lookup must cost what it did before binding:
    the proc meant is built (its id checked) with the peer, never per value sent."""
    sender = procs.spawn("sender", Sender).slice(hosts=0, gpus=0)
    port, receiver = Channel.open()
    sender.send.call_one(port, 0).get(timeout=TIMEOUT)
    assert receiver.recv().get(timeout=TIMEOUT) == 0  # its peer made, its handshake done
    assert sender.send_counting.call_one(port, [1, 2, 3]).get(timeout=TIMEOUT) == 0
    assert [receiver.recv().get(timeout=TIMEOUT) for _ in range(3)] == [1, 2, 3]
