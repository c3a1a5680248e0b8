"""Pod IPs: each pod gets its own loopback address from the node's 127.<index+10>.0.0/16.

All of 127.0.0.0/8 reaches the loopback interface on Linux, so a process can bind its pod IP
with no network setup. Used by :mod:`.agent`.
"""

from __future__ import annotations

import ipaddress
import threading


class PodIPs:
    """Hands out addresses of one /16, skipping .0 and .255 in the last octet."""

    def __init__(self, cidr: str) -> None:
        self._network = ipaddress.ip_network(cidr)
        self._next = 1
        self._held: dict[str, str] = {}
        self._lock = threading.Lock()

    def acquire(self, pod_uid: str) -> str:
        with self._lock:
            if pod_uid in self._held:
                return self._held[pod_uid]
            in_use = set(self._held.values())
            for _ in range(self._network.num_addresses):
                offset = self._next
                self._next = self._next % (self._network.num_addresses - 2) + 1
                if offset % 256 in (0, 255):
                    continue
                address = str(self._network.network_address + offset)
                if address not in in_use:
                    self._held[pod_uid] = address
                    return address
            raise RuntimeError(f"pod range {self._network} is exhausted")

    def release(self, pod_uid: str) -> None:
        with self._lock:
            self._held.pop(pod_uid, None)
