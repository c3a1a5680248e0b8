"""Operation codes of requests to a proc server (the second field of a request header).

Request header: ``(call_id, op, *fields)``; reply header: ``(call_id, status)``. The actor
layer sends them (:mod:`mesh_client._src.actor`), the proc server answers them
(:mod:`mesh_client._src.server.dispatch` and ``.actors``); replies are decoded by
:mod:`mesh_client._src.actor.messages`.
"""

CALL = 1  # (actor_id, method, index in slice, slice labels, slice sizes); payload (args, kwargs)
SPAWN = 2  # (actor_id, name, index in mesh, labels, sizes, {file: source}); payload (cls, args, kwargs, proc mesh, creator)
BOOTSTRAP = 3  # ({file: source}); payload: a callable run before any actor
STOP_ACTOR = 4  # (actor_id, reason)
STOP = 5  # (); the proc server replies, then exits
IDENTIFY = 6  # (); reply: one JSON segment, the proc's identity (no pickle, so a client reads it before trusting any)
WATCH = 7  # (actor_id,); the reply comes when the actor ends: OK if stopped, DEAD (a report) if it failed
PORT_SEND = 8  # (port_id, ok, rank or None); payload: the value or exception; one-way, for ports of that process
FORWARD = 16  # ((actor_id, method, labels, sizes), node); payload (args, kwargs); tree fan-out (actor/trees.py, server/forwarding.py)
