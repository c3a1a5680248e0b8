"""A process's proc groups follow their shared peers weakly (actor/procs.py, runtime/peers.py).

Every actor-mesh reference a process unpickles (a call argument, a returned handle, a spawn's
payload) makes a ProcGroup that follows the process-wide peer of each proc; held strongly, and
checked by a scan for duplicates, they made each later reference slower without end. Aspects:
a dropped group is no follower; a live one is told of its peer's successor exactly once.
"""

import gc
import pickle

from mesh_client._src.actor.procs import ProcGroup
from mesh_client._src.runtime import peers

ADDRESS = ("127.0.0.1", 1)  # never connected: following is bookkeeping only
TOKEN = b"t" * 32


def test_dropped_groups_are_no_followers():
    kept = ProcGroup("m", [ADDRESS], TOKEN, ["m[0]"])
    peer = kept.peers[0]
    try:
        for _ in range(1000):
            pickle.loads(pickle.dumps(kept))  # a reference received, then dropped
        gc.collect()
        assert list(peer.on_relinked) == [kept]
        new = peers.Peer(ADDRESS, TOKEN, "m[0]")
        for listener in list(peer.on_relinked):
            listener.peer_relinked(peer, new)
        assert kept.peers == [new]
    finally:
        peers.forget_peer(peer)
