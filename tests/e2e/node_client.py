"""``python -m tests.e2e.node_client MESH NAMESPACE [HOLD [WAIT]]``: a client on the node, reaching pod IPs.

Run by the e2e tests inside the cluster's network namespace (where pod IPs route), as an
in-cluster controller would connect. It attaches to the mesh, checks a call on proc 1 (and that
the proc's image has the native waits), prints
``READY`` with a call in flight (one that sleeps HOLD seconds there, 120 by default), and then
prints how that call ended (``SUPERVISION <message>`` or ``RESULT ...``, waiting WAIT seconds for
it, 90 by default), so the test can kill the proc's container, or cut its network, in between.
"""

from __future__ import annotations

import sys

from mesh_client import Actor, SupervisionError, endpoint
from mesh_client.kubernetes import attach


class Sleeper(Actor):
    @endpoint
    def echo(self, value: int) -> int:
        return value

    @endpoint
    def native_waits(self) -> bool:
        from mesh_client._src.runtime import waits

        return waits.native is not None

    @endpoint
    def sleep(self, seconds: float) -> None:
        import time

        time.sleep(seconds)


def main(name: str, namespace: str, hold: str = "120", wait: str = "90") -> int:
    # As in Monarch, a proc lost under this controller's actors is also a supervision event,
    # whose default hook ends the controller; this one reports the failed call instead.
    import mesh_client.actor

    mesh_client.actor.unhandled_fault_hook = lambda failure: None
    mesh = attach(name, namespace, timeout=300)
    proc = mesh.spawn("sleeper", Sleeper).slice(hosts=0, gpus=1)
    assert proc.echo.call_one(7).get(timeout=60) == 7
    # Our proc-server image carries the native waits (built in its wheel stage, no compiler kept).
    assert proc.native_waits.call_one().get(timeout=60), "the proc-server image lacks mesh_client's _waits module"
    pending = proc.sleep.call_one(float(hold))
    print("READY", flush=True)
    try:
        print(f"RESULT {pending.get(timeout=float(wait))!r}", flush=True)
    except SupervisionError as error:
        print(f"SUPERVISION {error}".replace("\n", " "), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
