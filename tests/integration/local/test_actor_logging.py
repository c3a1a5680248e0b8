"""Monarch's ``Actor.logger`` and ``ProcMesh.logging_option`` on local procs.

Aspects: ``self.logger`` is the logger named for the actor's class, at DEBUG, with no handler of
its own; a proc's root logger starts at INFO; without a handler configured, its warnings reach
the controller's stderr through Python's last resort, led by the proc's prefix and otherwise
bare, as Monarch prints them (its info lines are not shown), also from ``__cleanup__``;
``logging_option`` is a coroutine that sets every proc's root level, leaves the lines bare with
``stream_to_client=False`` and prefixes them again with True (also in a proc restarted after it),
and checks its arguments as Monarch does. The controller runs in a subprocess whose streams are
pipes.
"""

import json
import os
import subprocess
import sys
import textwrap

PROGRAM = textwrap.dedent('''
    import asyncio
    import json
    import logging
    import os
    import sys
    from mesh_client import Actor, endpoint, this_host
    import mesh_client

    mesh_client.unhandled_fault_hook = lambda failure: None  # the kill below is expected

    class Logs(Actor):
        @endpoint
        def log(self, tag: str) -> dict:
            self.logger.debug(f"debug {tag}")
            self.logger.info(f"info {tag}")
            self.logger.warning(f"warning {tag}")
            print(f"print {tag}", flush=True)
            return {"name": self.logger.name, "level": self.logger.level, "handlers": len(self.logger.handlers),
                    "root": logging.getLogger().level, "same": self.logger is self.logger}

        @endpoint
        def pid(self) -> int:
            return os.getpid()

        def __cleanup__(self, exc):
            self.logger.warning("cleaning up")

    def errors():
        out = []
        for kwargs in ({"stream_to_client": False, "aggregate_window_sec": 3}, {"level": 300}, {"level": -1}):
            try:
                asyncio.run(procs.logging_option(**kwargs))
            except Exception as exc:
                out.append(f"{type(exc).__name__}: {exc}")
        return out

    procs = this_host().spawn_procs(per_host={"gpus": 2}, name="lg")
    logs = procs.spawn("logs", Logs)
    result = {"first": logs.slice(gpus=0).log.call_one("first").get()}
    pending = procs.logging_option(stream_to_client=False, level=logging.WARNING)
    result["coroutine"] = asyncio.iscoroutine(pending)
    asyncio.run(pending)
    result["bare"] = logs.slice(gpus=0).log.call_one("bare").get()["root"]
    asyncio.run(procs.logging_option(stream_to_client=True, aggregate_window_sec=3, level=logging.DEBUG))
    result["again"] = logs.slice(gpus=1).log.call_one("again").get()["root"]
    asyncio.run(procs.logging_option(stream_to_client=False))
    os.kill(logs.slice(gpus=1).pid.call_one().get(), 9)
    while True:  # respawn once the death was seen
        try:
            logs.slice(gpus=1).pid.call_one().get()
        except mesh_client.SupervisionError:
            break
    procs.respawn()
    logs.slice(gpus=1).log.call_one("restarted").get()
    result["errors"] = errors()
    logs.stop().get()
    procs.stop().get()
    print("RESULT " + json.dumps(result), flush=True)
''')


def run_program() -> tuple[dict, list[str], list[str]]:
    done = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=300, env=dict(os.environ))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    result = json.loads(next(line for line in lines if line.startswith("RESULT "))[len("RESULT "):])
    return result, lines, done.stderr.splitlines()


def test_actor_logger_and_logging_option():
    result, out, err = run_program()
    assert result["first"] == {"name": "Logs", "level": 10, "handlers": 0, "root": 20, "same": True}
    # Python's last resort shows warnings alone, bare but for the proc's prefix, as Monarch's.
    assert "[lg rank 0] warning first" in err
    assert not [line for line in err if "info first" in line or "debug first" in line]
    assert "[lg rank 0] print first" in out
    # stream_to_client=False: bare lines; the root level is what logging_option set.
    assert result["coroutine"] is True and result["bare"] == logging_level("WARNING")
    assert "warning bare" in err and "print bare" in out
    # Streaming again: the prefix is back, and DEBUG lets the root's own records through.
    assert result["again"] == logging_level("DEBUG")
    assert "[lg rank 1] warning again" in err and "[lg rank 1] print again" in out
    # A proc started in a dead one's place follows the last choice (bare).
    assert "print restarted" in out
    # __cleanup__ logs too (each proc's actor, bare by then).
    assert err.count("cleaning up") == 2
    assert result["errors"] == [
        "RuntimeError: cannot set aggregate window without streaming to client",
        "ValueError: Invalid logging level: 300",
        "ValueError: Invalid logging level: -1",
    ]


def logging_level(name: str) -> int:
    import logging

    return getattr(logging, name)
