"""Monarch names a ported program uses beside spawn and call: host meshes, tables, workspaces,
port flags, and the tensor engine's names, with real local procs.

Aspects: a one-proc slice's ``host_mesh`` is this machine, and procs spawned on it run; a mesh
of several procs refuses it with Monarch's words; an actor's own proc, and a mesh it was sent,
have this machine as host; ``to_table`` of a mesh and of a slice, also in an actor that was sent
the slice; ``this_host().stop()`` and ``shutdown()`` give futures failing with Monarch's words and
what to do, and the host spawns as before; ``sync_workspace`` is refused on the host and on a proc
mesh; ``Port.return_undeliverable`` in an actor; ``rref``, ``activate`` and ``rank_tensor(s)``
raise NotImplementedError naming the tensor engine and what to use.
"""

import asyncio

import pytest

from mesh_client import Channel, this_host, this_proc
from tests.integration.local.actors import HostAware

TENSOR_ENGINE = r"Monarch's tensor engine .*procmesh does not have.*inside actors.*setup_torch_elastic_env"


def test_a_one_proc_slice_has_this_machine_as_host_mesh(procs):
    one = procs.slice(hosts=1, gpus=0)
    assert one.host_mesh == this_host()
    assert this_proc().host_mesh == this_host()
    beside = one.host_mesh.spawn_procs(per_host={"g": 1}, name="beside")
    try:
        assert beside.spawn("b", HostAware).ping.call_one().get(timeout=60) == 1
    finally:
        beside.stop().get()


def test_a_mesh_of_several_procs_has_no_one_host_mesh(procs):
    with pytest.raises(NotImplementedError, match=r"^`ProcMesh.host_mesh` is not yet supported for non-singleton"):
        _ = procs.host_mesh


def test_actors_see_this_machine_as_the_host_of_their_proc_and_of_meshes_sent_to_them(procs):
    actors = procs.spawn("hosts", HostAware)
    assert list(actors.own_host.call().get(timeout=60).values()) == [["HostMesh", True]] * 4
    assert actors.slice(hosts=0, gpus=0).host_of.call_one(procs.slice(hosts=1, gpus=1)).get(timeout=60) is True


def test_to_table_draws_a_mesh_and_a_slice_with_ranks_of_the_mesh_it_comes_from(procs):
    table = procs.to_table()
    assert "      \u2502|  1 | 1.gpu[0] | 1.gpu[1] |" in table.splitlines()
    sliced = procs.slice(gpus=1)
    assert "| 0.gpu[1] | 1.gpu[1] |" in sliced.to_table().splitlines()
    actor = procs.spawn("tables", HostAware).slice(hosts=0, gpus=0)
    assert actor.table_of.call_one(sliced).get(timeout=60) == sliced.to_table()


def test_this_host_is_not_the_program_s_to_stop_or_shut_down(procs):
    for future, verb in ((this_host().stop(), "stop"), (this_host().shutdown(), "shut down")):
        with pytest.raises(RuntimeError, match=rf"^cannot {verb} `HostMesh` that is a reference instead of owned;"
                                               r".*procs.stop\(\)"):
            future.get(timeout=10)
    again = this_host().spawn_procs(per_host={"g": 1}, name="again")
    try:
        assert again.spawn("a", HostAware).ping.call_one().get(timeout=60) == 1
    finally:
        again.stop().get()


def test_sync_workspace_is_refused_saying_there_is_nothing_to_sync(procs):
    with pytest.raises(RuntimeError, match=r"^cannot call sync_workspace .*nothing to sync"):
        asyncio.run(this_host().sync_workspace(None))
    with pytest.raises(NotImplementedError, match=r"^sync_workspace is not implemented for ProcMesh\. "
                                                  r"Use HostMesh\.sync_workspace"):
        asyncio.run(procs.sync_workspace(None))


def test_return_undeliverable_reads_true_and_takes_false_in_an_actor(procs):
    actor = procs.spawn("flags", HostAware).slice(hosts=0, gpus=1)
    assert actor.undeliverable.call_one().get(timeout=60) == [True, False]
    port, _ = Channel.open()
    assert port.return_undeliverable is True


def test_the_tensor_engine_s_names_say_what_to_use_instead(procs):
    actors = procs.spawn("te", HostAware)
    with pytest.raises(NotImplementedError, match=r"^te\.ping\.rref\(\) belongs to " + TENSOR_ENGINE):
        actors.ping.rref()
    for use, what in ((procs.activate, r"ProcMesh\.activate\(\)"), (lambda: procs.rank_tensor("gpus"),
                      r"ProcMesh\.rank_tensor\('gpus'\)"), (procs.rank_tensors, r"ProcMesh\.rank_tensors\(\)")):
        with pytest.raises(NotImplementedError, match=rf"^{what} belongs to " + TENSOR_ENGINE):
            use()
