"""What an SPMD actor in a proc takes for TORCHELASTIC_RUN_ID and the restart counts
(ProcGroup.elastic_info): the client's, carried in the pickled group; none from a client that
did not send them (an older one), so the actor falls back to its own id, the same on every rank,
instead of the group's run id made afresh at each unpickling."""

import pickle

from mesh_client._src.actor.procs import ProcGroup


class Owner:
    def elastic_info(self):
        return ("ddp-1234abcd", 2, 5)


def group(owner=None):
    return ProcGroup("m", [("127.0.0.1", 1), ("127.0.0.1", 2)], b"t" * 32, ["m[0]", "m[1]"], owner)


def test_the_clients_values_travel_with_the_group():
    sent = pickle.loads(pickle.dumps(group(Owner())))
    assert sent.owner is None and sent.elastic_info() == ("ddp-1234abcd", 2, 5)


def test_a_local_group_has_its_run_id_and_no_restarts():
    local = group(owner=object())
    assert local.elastic_info() == (local.run_id, 0, 0)
    assert pickle.loads(pickle.dumps(local)).elastic_info() == (local.run_id, 0, 0)


def test_a_group_from_a_client_that_did_not_say_has_none():
    # An older client's pickle: the constructor's arguments, no state.
    older = pickle.loads(pickle.dumps(group(Owner())))
    older.elastic = None
    assert older.elastic_info() is None
