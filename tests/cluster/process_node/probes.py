"""Readiness, liveness and startup probes (tcpSocket, httpGet, exec), as the kubelet runs them.

:func:`check` runs one probe once and says whether it passed. :class:`Prober` is a thread that
runs one probe of one container run on its period and applies the success and failure
thresholds; :mod:`.containers` reads its :attr:`Prober.result`. Probes only ever connect to
loopback addresses (the pod IP, or a loopback ``host``).
"""

from __future__ import annotations

import http.client
import ipaddress
import socket
import ssl
import subprocess
import threading
from collections.abc import Callable
from typing import Any

Obj = dict[str, Any]
#: ``run_exec(argv, timeout)``: runs a command in the container's sandbox; returns the exit code.
ExecRunner = Callable[[list[str], float], int]


def _port(value: Any, container: Obj) -> int:
    if isinstance(value, int) or str(value).isdigit():
        return int(value)
    for port in container.get("ports") or []:
        if port.get("name") == value:
            return int(port["containerPort"])
    raise ValueError(f"no container port named {value!r}")


def _loopback(host: str) -> str:
    try:
        if ipaddress.ip_address(host).is_loopback:
            return host
    except ValueError:
        if host == "localhost":
            return "127.0.0.1"
    raise ValueError(f"probe host {host!r} is not a loopback address; the process node only probes loopback")


def check(probe: Obj, container: Obj, pod_ip: str, run_exec: ExecRunner) -> tuple[bool, str]:
    """Run ``probe`` once; returns (passed, message)."""
    timeout = float(probe.get("timeoutSeconds") or 1)
    try:
        if "tcpSocket" in probe:
            spec = probe["tcpSocket"]
            host = _loopback(spec.get("host") or pod_ip)
            with socket.create_connection((host, _port(spec["port"], container)), timeout=timeout):
                return True, ""
        if "httpGet" in probe:
            spec = probe["httpGet"]
            host = _loopback(spec.get("host") or pod_ip)
            port = _port(spec["port"], container)
            if spec.get("scheme", "HTTP").upper() == "HTTPS":
                context = ssl.create_default_context()
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE  # the kubelet does not verify probe targets
                conn: http.client.HTTPConnection = http.client.HTTPSConnection(host, port, timeout=timeout, context=context)
            else:
                conn = http.client.HTTPConnection(host, port, timeout=timeout)
            try:
                headers = {h["name"]: h["value"] for h in spec.get("httpHeaders") or []}
                headers.setdefault("User-Agent", "kube-probe/procmesh")
                conn.request("GET", spec.get("path") or "/", headers=headers)
                status = conn.getresponse().status
            finally:
                conn.close()
            return 200 <= status < 400, f"HTTP probe failed with statuscode: {status}"
        if "exec" in probe:
            code = run_exec(list(probe["exec"]["command"]), timeout)
            return code == 0, f"command exited with {code}"
    except subprocess.TimeoutExpired:
        return False, f"command timed out after {timeout:g}s"
    except (OSError, ValueError, http.client.HTTPException) as error:
        return False, str(error)
    return False, "unsupported probe handler"


class Prober(threading.Thread):
    """Runs one probe periodically; :attr:`result` is None until decided, then True or False."""

    def __init__(self, kind: str, probe: Obj, container: Obj, pod_ip: str, run_exec: ExecRunner,
                 on_change: Callable[[str, bool, str], None]) -> None:
        super().__init__(name=f"probe-{container['name']}-{kind}", daemon=True)
        self.kind, self.probe, self.container, self.pod_ip = kind, probe, container, pod_ip
        self.run_exec, self.on_change = run_exec, on_change
        self.result: bool | None = None
        self.stopping = threading.Event()

    def stop(self) -> None:
        self.stopping.set()

    def run(self) -> None:
        probe = self.probe
        period = float(probe.get("periodSeconds") or 10)
        need_success = int(probe.get("successThreshold") or 1)
        need_failure = int(probe.get("failureThreshold") or 3)
        successes = failures = 0
        if self.stopping.wait(float(probe.get("initialDelaySeconds") or 0)):
            return
        while not self.stopping.is_set():
            passed, message = check(probe, self.container, self.pod_ip, self.run_exec)
            if self.stopping.is_set():
                return
            if passed:
                successes, failures = successes + 1, 0
                if successes >= need_success and self.result is not True:
                    self.result = True
                    self.on_change(self.kind, True, "")
            else:
                successes, failures = 0, failures + 1
                if failures >= need_failure and self.result is not False:
                    self.result = False
                    self.on_change(self.kind, False, message)
            if self.kind == "startup" and self.result is True:
                return  # a startup probe stops once it has passed
            self.stopping.wait(period)
