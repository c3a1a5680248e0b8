"""The rest of Monarch's actor API: concurrent endpoints, ports and channels, send, Accumulator,
get_or_spawn_controller, current_actor_name, Point's text, HostMesh options.

Aspects: a concurrent endpoint lets the actor take the message it waits for; an explicit response
port carries a value or an error (raised as itself) back to the caller; a Channel's port reaches
the controller from actors in other procs, and an exception sent there is raised as itself;
send() with a port, and a ranked receiver's (rank, value); Accumulator folds a call;
get_or_spawn_controller gives one actor per name; current_actor_name, str(current_rank()), log records and
str(context().actor_instance) read as Monarch's; as_endpoint reaches a method without @endpoint.
"""

import sys

import pytest

from mesh_client import (
    Accumulator,
    Channel,
    get_or_spawn_controller,
    send,
    this_host,
)
from tests.integration.local.actors import Concurrent, Ports, Recorder


def test_a_concurrent_endpoint_runs_beside_the_next_message(procs):
    actor = procs.slice(hosts=0, gpus=0).spawn("conc", Concurrent)
    waiting = actor.wait_for_open.call_one()
    actor.open.call_one().get()
    assert waiting.get(timeout=60) == "opened"


def test_explicit_response_ports_carry_values_and_errors(procs):
    """The exception sent is raised as itself, as in Monarch: a ported ``except ValueError`` catches it."""
    actors = procs.spawn("ports", Ports)
    assert list(actors.later.call(21).get().values()) == [42] * 4
    with pytest.raises(ValueError, match="^refused$"):
        actors.slice(hosts=0, gpus=1).refuse.call_one().get()
    with pytest.raises(ValueError, match="^refused$"):
        actors.refuse.call().get()


def test_an_exception_sent_to_a_channel_from_another_proc_is_raised_as_itself(procs):
    port, receiver = Channel.open()
    procs.spawn("fail_to", Ports).slice(hosts=1, gpus=0).fail_to.call_one(port, "pushed").get()
    with pytest.raises(KeyError) as raised:
        receiver.recv().get(timeout=60)
    assert raised.value.args == ("pushed",)


def test_a_channel_port_reaches_the_controller_from_other_procs(procs):
    port, receiver = Channel.open()
    procs.spawn("tell", Ports).tell.broadcast(port, "hi")
    got = sorted(receiver.recv().get(timeout=60) for _ in range(4))
    assert got[0] == ("{'hosts': 0/2, 'gpus': 0/2}", "hi") and len(got) == 4


def test_send_with_a_port_and_accumulate(procs):
    actors = procs.spawn("sender", Ports)
    port, receiver = Channel.open()
    send(actors.rank, (), {}, port=port)
    assert sorted(receiver.recv().get(timeout=60) for _ in range(4)) == [0, 1, 2, 3]
    assert Accumulator(actors.rank, 0, lambda acc, r: acc + r).accumulate().get() == 6


def test_a_ranked_receiver_gives_each_result_with_its_rank_in_the_mesh_called(procs):
    actors = procs.spawn("ranked", Ports)
    port, receiver = Channel.open_ranked()
    send(actors.rank, (), {}, port=port)
    assert sorted(receiver.recv().get(timeout=60) for _ in range(4)) == [(0, 0), (1, 1), (2, 2), (3, 3)]
    send(actors.slice(hosts=1).rank, (), {}, port=port)  # ranks count in the slice, as Monarch's
    assert sorted(receiver.recv().get(timeout=60) for _ in range(2)) == [(0, 0), (1, 1)]
    send(actors.slice(hosts=1, gpus=1).refuse, (), {}, port=port)  # an explicit port's exception, itself
    with pytest.raises(ValueError, match="^refused$"):
        receiver.recv().get(timeout=60)


def test_get_or_spawn_controller_gives_one_actor_per_name():
    first = get_or_spawn_controller("the_controller", Recorder, "one").get()
    second = get_or_spawn_controller("the_controller", Recorder, "two").get()
    first.record.call_one("x").get()
    assert second.history.call_one().get() == ["x"]


def test_current_actor_name_names_each_actor(procs):
    actors = procs.spawn("named", Ports)
    names = list(actors.name.call().get().values())
    assert len(set(names)) == 4 and all(n.startswith("named-") for n in names)


def test_with_python_executable_and_is_fake_in_process():
    hosts = this_host().with_python_executable(sys.executable)
    assert hosts.is_fake_in_process is False
    with hosts.spawn_procs(per_host={"gpus": 1}) as mesh:
        assert mesh.spawn("p", Ports).rank.call_one().get() == 0


def test_log_records_and_str_of_the_instance_name_the_actor(procs):
    from mesh_client import context
    from tests.integration.local.actors import Logs

    line, me, creator = procs.spawn("the_name", Logs).slice(hosts=0, gpus=1).log_line.call_one().get()
    assert me == "<root>.<tests.integration.local.actors.Logs the_name{'hosts': 0/2, 'gpus': 1/2}>"
    assert line == f"[actor={me}] HUH\n"
    assert creator == "root" and str(context().actor_instance) == "<root>"


def test_as_endpoint_reaches_a_plain_method(procs):
    from mesh_client import as_endpoint

    rec = procs.spawn("plain", Recorder)
    with pytest.raises(RuntimeError, match="add a @endpoint decorator to it, or call it through as_endpoint"):
        rec.not_an_endpoint.call()
    assert list(as_endpoint(rec.not_an_endpoint).call().get().values()) == [None] * 4
