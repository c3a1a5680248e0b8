"""CPU time per small message of each runtime layer, one thread, no sockets: A/B of two checkouts.

The pipelined figures of ``call_ab.py`` add both processes' threads, wake-ups and the machine's
load; this takes the Python work per message alone, with each side's real objects over an
in-memory stream (``MockStream``), and keeps the least CPU time (``time.thread_time``) of
several rounds, which a loaded machine disturbs far less than wall time:

- proc reactor: a read of 64 CALL frames through ``ProcServer``'s channel (parse, decode the
  envelope, queue for the actor; the actor is a stand-in that only collects the work);
- controller issue: ``Peer.submit`` of a call without arguments, framed and written (the
  direct write of a call that is waited for: nothing held);
- controller reactor: a read of 64 replies through the peer's channel, each resolving its future;
- get: ``Future.get`` of a done future, decoding a None result.

Runs alternate between the checkouts. The actor layer above ``Peer.submit`` (``call_one``,
``_send``) and the actor thread are not in it: ``call_ab.py`` and ``actors.py --breakdown`` cover
those.

    python benchmarks/message_cost.py /tmp/main-snap .. --runs 4          # table
    python benchmarks/message_cost.py /tmp/main-snap .. --runs 4 --json   # JSON
"""

from __future__ import annotations

import argparse
import json

from call_ab import run_in, summarize

CODE = r"""
import json, socket, time
from mesh_client._src.runtime import coalescing, futures, ops, peers
from mesh_client._src.runtime.channel import Channel
from mesh_client._src.runtime.streams import MockStream
from mesh_client._src.server.dispatch import ProcServer
from mesh_client._src.wire import envelopes, frames, protocol, serialization

TOKEN, BATCH, N, ROUNDS = b"cost-token", 64, 6400, 15

class Collector:  # stands in for an ActorRunner: the reactor's side ends at the queue
    def __init__(self):
        self.work = []
    def put(self, work):
        self.work.append(work)
    submit = put

listener = socket.socket(); listener.bind(("127.0.0.1", 0)); listener.listen()
server = ProcServer(listener, TOKEN, identity={"mesh": "m", "rank": 0}, on_stop=lambda reason: None)
stream = MockStream([])
channel = server.open_channel(stream, "memory")
client = protocol.Connection(protocol.Role.CLIENT, TOKEN); client.start()
client.receive_data(bytes(stream.written)); client.next_event(); stream.written.clear()
stream.feed(client.data_to_send()); channel.on_readable(); stream.written.clear()
actor = Collector(); server.actors["actor-0"] = actor
fields = envelopes.request_fields(("actor-0", "noop", 0, ("gpus",), (1,)))
payload = serialization.dumps(((), {}))
read = b"".join(frames.encode_bytes(frames.Kind.MESSAGE, [envelopes.request_envelope(i + 1, ops.CALL, fields), *payload])
                for i in range(BATCH))

def proc_reactor():
    t = time.thread_time()
    for _ in range(N // BATCH):
        stream.feed(read); channel.on_readable(); actor.work.clear()
    return time.thread_time() - t

proc = min(proc_reactor() for _ in range(ROUNDS))

peer = peers.Peer(("memory", 0), TOKEN, "memory")
cstream = MockStream([])
conn = protocol.Connection(protocol.Role.CLIENT, TOKEN); conn.state = protocol.State.AUTHENTICATED
batch = {"on_messages": peer._on_messages} if hasattr(peer, "_on_messages") else {}
cchannel = Channel(cstream, conn, on_message=peer._on_message, on_closed=peer._on_closed, display="memory", **batch)
peer._channel, peer.identity = cchannel, {}
decode = lambda raw: serialization.loads(raw[1]) if raw[1] else None
result = serialization.dumps(None)

issue = replies = gets = float("inf")
for _ in range(ROUNDS):
    cstream.written.clear()
    futs = []
    t = time.thread_time()
    for _ in range(N):
        coalescing.waiting()  # each call written at once, as a waited-for call_one is
        fut = futures.Future(decode)
        peer.submit(fut, ops.CALL, fields, payload)
        futs.append(fut)
    issue = min(issue, time.thread_time() - t)
    ids = sorted(peer._pending)
    reads = [b"".join(frames.encode_bytes(frames.Kind.MESSAGE, envelopes.encode_reply(i, envelopes.OK, result)) for i in ids[k:k + BATCH])
             for k in range(0, len(ids), BATCH)]
    t = time.thread_time()
    for data in reads:
        cstream.feed(data); cchannel.on_readable()
    replies = min(replies, time.thread_time() - t)
    t = time.thread_time()
    for fut in futs:
        fut.get()
    gets = min(gets, time.thread_time() - t)
print(json.dumps({"proc_reactor_ns_per_request": proc / N * 1e9, "controller_issue_ns_per_call": issue / N * 1e9,
                  "controller_reactor_ns_per_reply": replies / N * 1e9, "get_ns_per_call": gets / N * 1e9}))
"""

KEYS = ("proc_reactor_ns_per_request", "controller_issue_ns_per_call", "controller_reactor_ns_per_reply", "get_ns_per_call")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("baseline", help="checkout A (e.g. a git archive of main)")
    parser.add_argument("candidate", help="checkout B")
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results: dict[str, list[dict[str, float]]] = {args.baseline: [], args.candidate: []}
    for i in range(args.runs):
        for checkout in (args.baseline, args.candidate) if i % 2 == 0 else (args.candidate, args.baseline):
            results[checkout].append(run_in(checkout, CODE))
    summary = summarize(results, KEYS)
    if args.json:
        print(json.dumps({"runs": results, "summary": summary}, indent=2))
        return
    print(f"{'ns of CPU per message (least of 15 rounds)':42} {'checkout':30} {'median':>8} {'best':>8}")
    for key in KEYS:
        for checkout in results:
            row = summary[checkout][key]
            print(f"{key:42} {checkout[-30:]:30} {row['median']:8.0f} {row['best']:8.0f}")


if __name__ == "__main__":
    main()
