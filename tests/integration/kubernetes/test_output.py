"""What the procs print shows in the controller's terminal (issue 15, item 2), against the real
control plane and operator.

Aspects: each line once, with its proc's rank, from the moment of attach (what the procs had
printed before is not repeated; what they print right after is not lost); a restarted proc's new
run shows from its start; forward_output=False forwards nothing; a program that exits without
stopping its mesh still shows every line its procs printed (it showed none of a burst).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from mesh_client.kubernetes import attach
from tests.cluster import testing
from tests.integration.cli.support import env
from tests.integration.cli.test_logs import Talker
from tests.integration.operator.support import ROOT, create_mesh, kill_proc, token, wait_ready

pytestmark = pytest.mark.cluster


class Seen:
    """Lines the test's stdout received so far (capsys), accumulated across reads."""

    def __init__(self, capsys) -> None:
        self.capsys = capsys
        self.lines: list[str] = []

    def read(self) -> list[str]:
        self.lines += self.capsys.readouterr().out.splitlines()
        return self.lines


def test_proc_output_reaches_the_controller_once_with_its_rank(kube, custom, core, namespace, operator,
                                                               capsys):
    create_mesh(custom, namespace, "chatty", hosts=2, perHost=[{"name": "procs", "size": 2}])
    ready = wait_ready(custom, namespace, "chatty")
    mesh = attach("chatty", namespace, api_client=kube, timeout=120, progress=False, forward_output=True)
    seen = Seen(capsys)
    try:
        mesh.spawn("talker", Talker).say.call("hello").get()
        expected = [f"[chatty rank {r}] hello from {r}" for r in range(4)]
        testing.wait_for(lambda: set(expected) <= set(seen.read()), "every proc's line, prefixed")
        assert sorted(x for x in seen.lines if "hello" in x) == expected  # each once
        assert not [x for x in seen.lines if "listening on" in x]  # printed before attach: not repeated

        address = ready["status"]["procs"][1]["address"]
        kill_proc(address, token(core, namespace, "chatty"))  # RestartProc: a new run of rank 1
        testing.wait_for(lambda: any(x.startswith("[chatty rank 1] procmesh: proc server chatty[1] listening")
                                     for x in seen.read()), "the restarted proc's run from its start")
    finally:
        mesh.stop().get()


def test_forwarding_can_be_switched_off(kube, custom, namespace, operator, monkeypatch):
    create_mesh(custom, namespace, "silent", hosts=1, perHost=[{"name": "procs", "size": 1}])
    monkeypatch.setenv("PROCMESH_FORWARD_OUTPUT", "0")
    mesh = attach("silent", namespace, api_client=kube, timeout=120, progress=False)
    try:
        assert mesh._group.owner.output is None
    finally:
        mesh.stop().get()
    loud = attach("silent", namespace, api_client=kube, timeout=120, progress=False, forward_output=True)
    try:
        assert loud._group.owner.output is not None
    finally:
        loud.stop().get()


EXITS_WITHOUT_STOP = textwrap.dedent(
    """
    import sys
    from mesh_client import Actor, endpoint
    from mesh_client.kubernetes import attach

    class Burst(Actor):
        @endpoint
        def burst(self, count: int) -> None:
            import os
            for i in range(count):
                print(f"line {i} of {os.environ['PROCMESH_RANK']}")
            sys.stdout.flush()

    mesh = attach(sys.argv[2], sys.argv[3], kubeconfig=sys.argv[1], timeout=120, progress=False, forward_output=True)
    mesh.spawn("burst", Burst).burst.call(300).get()
    """  # and the program ends, its mesh still attached
)


def test_a_program_that_exits_without_stopping_shows_every_line(cluster, custom, namespace, operator):
    create_mesh(custom, namespace, "burst", hosts=1, perHost=[{"name": "procs", "size": 2}])
    wait_ready(custom, namespace, "burst")
    done = subprocess.run([sys.executable, "-c", EXITS_WITHOUT_STOP, str(cluster.kubeconfig), "burst", namespace],
                          cwd=ROOT, env=env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if " line " in line]
    expected = [f"[burst rank {r}] line {i} of {r}" for r in range(2) for i in range(300)]
    assert sorted(lines) == sorted(expected), (len(lines), done.stderr[-2000:])
