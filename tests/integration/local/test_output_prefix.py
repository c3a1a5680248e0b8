"""What local procs print shows in the controller's terminal led by the proc's name, as on
Kubernetes (``[<mesh> rank <r>] ``), and bare when switched off.

Aspects: stdout and stderr lines of every rank carry their prefix, on both launch paths (forked
by the zygote, and exec'd with ``PROCMESH_ZYGOTE=0``); a line printed in pieces gets one prefix
(its pieces are separate writes, so another proc's line may come between them: the procs talk
one at a time here), a multi-line print one per line; ``forward_output=False`` (of
``spawn_procs`` and ``spawn_procs_async``) and ``PROCMESH_FORWARD_OUTPUT=0`` leave lines bare. The controller runs in a subprocess whose streams are pipes.
"""

import os
import subprocess
import sys
import textwrap

import pytest

PROGRAM = textwrap.dedent('''
    import asyncio
    import sys
    from mesh_client import Actor, endpoint, this_host

    class Talker(Actor):
        @endpoint
        def talk(self, rank: int) -> None:
            print(f"out from {rank}", flush=True)
            print(f"err from {rank}", file=sys.stderr, flush=True)
            print("in ", end="", flush=True)
            print("pieces", flush=True)
            print("first\\nsecond", flush=True)

    if __name__ == "__main__":
        choice = {"on": None, "off": False, "async-off": False}[sys.argv[1]]
        if sys.argv[1].startswith("async"):
            procs = asyncio.run(this_host().spawn_procs_async(per_host={"gpus": 2}, name="talk",
                                                              forward_output=choice))
        else:
            procs = this_host().spawn_procs(per_host={"gpus": 2}, name="talk", forward_output=choice)
        talkers = procs.spawn("talker", Talker)
        for rank in (0, 1):  # one at a time: a line flushed in pieces is two writes
            talkers.slice(gpus=rank).talk.call(rank).get()
        procs.stop().get()
''')


def run(switch: str, **env: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-c", PROGRAM, switch], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, **env))
    assert done.returncode == 0, done.stderr
    return done


@pytest.mark.parametrize("zygote", ["1", "0"])
def test_each_line_names_its_proc(zygote):
    done = run("on", PROCMESH_ZYGOTE=zygote)
    out, err = done.stdout.splitlines(), done.stderr.splitlines()
    for rank in (0, 1):
        prefix = f"[talk rank {rank}] "
        assert f"{prefix}out from {rank}" in out
        assert f"{prefix}err from {rank}" in err
        assert f"{prefix}in pieces" in out
        assert f"{prefix}first" in out and f"{prefix}second" in out
    assert all(line.startswith(("[talk rank 0] ", "[talk rank 1] ")) for line in out), out


@pytest.mark.parametrize(("switch", "env"), [("off", {}), ("async-off", {}), ("on", {"PROCMESH_FORWARD_OUTPUT": "0"})])
def test_switched_off_lines_are_bare(switch, env):
    done = run(switch, **env)
    assert sorted(done.stdout.splitlines()) == sorted(
        ["out from 0", "out from 1", "in pieces", "in pieces", "first", "first", "second", "second"])
    assert "err from 0" in done.stderr.splitlines()
