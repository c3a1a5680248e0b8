"""One container of a pod: its process runs, restarts with back-off, probes and output.

A :class:`Container` starts each run through :mod:`.sandbox` in its own session, keeps each run's
output in ``<pod folder>/<container>-<run>.log``, applies the pod's restartPolicy with a doubling
back-off (``CrashLoopBackOff`` while waiting), kills a run whose liveness or startup probe fails,
and describes itself for the pod status through :meth:`Container.status`. Driven by
:class:`tests.cluster.process_node.pods.PodWorker`, which calls :meth:`Container.tick` often.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.cluster import processes
from tests.cluster.process_node import api, probes, volumes

Obj = dict[str, Any]
SANDBOX = str(Path(__file__).with_name("sandbox.py"))
#: How soon a container that could not be configured (missing secret...) is tried again.
CONFIG_RETRY_SECONDS = 2.0

#: ``notify(reason, message, type)``: post an event about the pod.
Notify = Callable[[str, str, str], None]


@dataclasses.dataclass(frozen=True)
class Launch:
    """What a run executes: resolved argv, environment, working folder and mounts."""

    argv: list[str]
    env: dict[str, str]
    cwd: str | None
    mounts: list[volumes.Mount]

    def spec(self, argv: list[str] | None = None) -> str:
        return json.dumps({"argv": argv or self.argv, "env": self.env, "cwd": self.cwd,
                           "mounts": [dataclasses.asdict(m) for m in self.mounts]})


@dataclasses.dataclass(frozen=True)
class Backoff:
    initial: float
    maximum: float

    def delay(self, crashes: int) -> float:
        """Wait before restart number ``crashes`` (1-based) of a crash loop."""
        return float(min(self.initial * 2 ** max(crashes - 1, 0), self.maximum))


class Container:
    """The runs of one container; not thread-safe except :meth:`wake` callbacks from probers."""

    def __init__(self, spec: Obj, pod: Obj, pod_dir: Path, pod_ip: str, backoff: Backoff,
                 notify: Notify, wake: Callable[[], None], init: bool = False) -> None:
        self.spec, self.name = spec, spec["name"]
        self.restart_policy = pod["spec"].get("restartPolicy", "Always")
        if init and self.restart_policy == "Always":
            self.restart_policy = "OnFailure"  # an init container that succeeded is never rerun
        self.grace = float(pod["spec"].get("terminationGracePeriodSeconds", 30))
        self.pod_uid = pod["metadata"]["uid"]
        self.pod_dir, self.pod_ip, self.backoff = pod_dir, pod_ip, backoff
        self.notify, self.wake = notify, wake
        self.launch: Launch | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.runs = 0
        self.restart_count = 0
        self.crashes = 0
        self.state: Obj = {"waiting": {"reason": "ContainerCreating"}}
        self.last_state: Obj = {}
        self.next_start = 0.0
        self.run_started = 0.0
        self.started_passed = False
        self.probers: dict[str, probes.Prober] = {}
        self.stopping = False
        self.killing_since: float | None = None
        self._lock = threading.Lock()

    # What the status shows...

    @property
    def running(self) -> bool:
        return self.proc is not None

    @property
    def done(self) -> bool:
        """Terminated for good: it will not be restarted."""
        return "terminated" in self.state and self.proc is None

    @property
    def succeeded(self) -> bool:
        return self.done and self.state["terminated"]["exitCode"] == 0

    @property
    def ready(self) -> bool:
        if not self.running or not self.started_passed:
            return False
        readiness = self.probers.get("readiness")
        return readiness is None or readiness.result is True

    def status(self) -> Obj:
        """This container's entry of ``status.containerStatuses``."""
        return {
            "name": self.name,
            "image": self.spec.get("image", ""),
            "imageID": "",
            "containerID": f"procmesh://{self.pod_uid}/{self.name}/{self.runs}" if self.runs else None,
            "ready": self.ready,
            "started": self.running and self.started_passed,
            "restartCount": self.restart_count,
            "state": self.state,
            "lastState": self.last_state,
        }

    def fail_config(self, reason: str, message: str) -> None:
        """The container cannot be set up (bad env reference, missing secret...): it waits."""
        self.state = {"waiting": {"reason": reason, "message": message}}
        self.next_start = time.monotonic() + CONFIG_RETRY_SECONDS

    # Runs...

    def log_path(self, run: int) -> Path:
        return self.pod_dir / f"{self.name}-{run}.log"

    def start(self, launch: Launch) -> None:
        """Start a run now."""
        self.launch = launch
        self.runs += 1
        spec_path = self.pod_dir / f"{self.name}.spec.json"
        spec_path.write_text(launch.spec())
        with open(self.log_path(self.runs), "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-E", "-s", SANDBOX, str(spec_path)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        processes.write_pidfile(self.pod_dir / f"{self.name}.pid", self.proc.pid)
        self.run_started = time.monotonic()
        self.killing_since = None
        self.state = {"running": {"startedAt": api.now()}}
        self.notify("Started", f"Started container {self.name}", "Normal")
        self._start_probers(startup=True)

    def _start_probers(self, startup: bool) -> None:
        kinds = ("startup",) if startup and self.spec.get("startupProbe") else ("readiness", "liveness")
        if kinds == ("readiness", "liveness"):
            self.started_passed = True
        for kind in kinds:
            probe = self.spec.get(f"{kind}Probe")
            if probe and any(k in probe for k in ("exec", "httpGet", "tcpSocket")):
                prober = probes.Prober(kind, probe, self.spec, self.pod_ip, self.run_exec, self._probed)
                self.probers[kind] = prober
                prober.start()
        self.wake()

    def _probed(self, kind: str, passed: bool, message: str) -> None:
        if not passed:
            self.notify("Unhealthy", f"{kind.capitalize()} probe failed: {message}", "Warning")
        self.wake()

    def run_exec(self, argv: list[str], timeout: float) -> int:
        """Run ``argv`` in this container's sandbox (exec probes); returns its exit code."""
        assert self.launch is not None
        spec_path = self.pod_dir / f"{self.name}.exec.{threading.get_ident()}.json"
        spec_path.write_text(self.launch.spec(argv))
        proc = subprocess.Popen([sys.executable, "-E", "-s", SANDBOX, str(spec_path)],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise

    def _stop_probers(self) -> None:
        for prober in self.probers.values():
            prober.stop()
        self.probers = {}
        self.started_passed = False

    def signal_stop(self) -> None:
        """Begin stopping the current run: SIGTERM its process group (no restart follows)."""
        self.stopping = True
        self._signal(signal.SIGTERM)

    def kill(self) -> None:
        self._signal(signal.SIGKILL)

    def _signal(self, sig: signal.Signals) -> None:
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                pass
            if sig == signal.SIGTERM and self.killing_since is None:
                self.killing_since = time.monotonic()

    def tick(self, launch: Callable[[], Launch | None]) -> None:
        """Advance: notice exits, restart after back-off, kill runs that fail liveness/startup."""
        if self.proc is not None:
            code = self.proc.poll()
            if code is None:
                self._check_probes()
                return
            self._exited(code)
        if self.stopping or "terminated" in self.state:
            return
        if time.monotonic() >= self.next_start:
            resolved = launch()
            if resolved is not None:
                if self.runs:
                    self.restart_count += 1
                self.start(resolved)

    def _check_probes(self) -> None:
        startup = self.probers.get("startup")
        if startup is not None and startup.result is True and not self.started_passed:
            self._start_probers(startup=False)
        failed = [k for k in ("startup", "liveness") if self.probers.get(k) and self.probers[k].result is False]
        if failed and self.killing_since is None:
            self.notify("Killing", f"Container {self.name} failed {failed[0]} probe, will be restarted", "Normal")
            self._signal(signal.SIGTERM)
        if self.killing_since is not None and time.monotonic() - self.killing_since > self.grace:
            self.kill()

    def _exited(self, code: int) -> None:
        assert self.proc is not None
        self._stop_probers()
        pid = self.proc.pid
        self.proc = None
        (self.pod_dir / f"{self.name}.pid").unlink(missing_ok=True)
        try:
            os.killpg(pid, signal.SIGKILL)  # leftovers of the run's process group
        except ProcessLookupError:
            pass
        exit_code = code if code >= 0 else 128 - code
        started = self.state.get("running", {}).get("startedAt")
        terminated = {"exitCode": exit_code, "reason": "Completed" if exit_code == 0 else "Error",
                      "startedAt": started, "finishedAt": api.now()}
        ran = time.monotonic() - self.run_started
        restart = not self.stopping and (
            self.restart_policy == "Always" or (self.restart_policy == "OnFailure" and exit_code != 0))
        if not restart:
            self.state = {"terminated": terminated}
            return
        self.crashes = 1 if ran > 2 * self.backoff.maximum else self.crashes + 1
        delay = self.backoff.delay(self.crashes)
        self.last_state = {"terminated": terminated}
        self.state = {"waiting": {"reason": "CrashLoopBackOff",
                                  "message": f"back-off {delay:g}s restarting failed container={self.name} pod={self.pod_uid}"}}
        self.next_start = time.monotonic() + delay
        self.notify("BackOff", f"Back-off restarting failed container {self.name}", "Warning")
