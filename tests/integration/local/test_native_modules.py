"""An install that could not build the call path's C modules (no C compiler) works, slower, and
says so: one warning, at the program's first proc mesh, naming what is missing and what to do.

Aspects:
- a controller whose import of _waits, _sends and _frames fails (a ``None`` in ``sys.modules``, as
  Python's import system reads it: the module cannot be imported) warns once over two meshes
  spawned at two lines, at the first (the user's own line), and its calls work;
- a controller whose _waits was built from older sources (no ``API``, or another) leaves it
  unused and says so, as for a missing one;
- a controller with the modules loaded (as this checkout is built) warns nothing;
- an install without them (a copy of mesh_client without its built modules), whose actor
  spawns procs of its own: the warning comes once, the controller's, never a proc server's
  (whose lines reach the same terminal);
- an async controller (spawn_procs_async, which spawns on a thread of its own): warned at the
  user's await, not at a line of threading.py;
- warnings made errors (``-W error``, pytest's ``filterwarnings = error``): the first spawn
  raises the warning, and its procs are stopped, as for any spawn that fails.
"""

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[3])

CONTROLLER = textwrap.dedent(
    """
    import sys
    if sys.argv[1] == "blocked":  # as an install that built no native module: the imports fail
        sys.modules["mesh_client._src.runtime._waits"] = None
        sys.modules["mesh_client._src.runtime._sends"] = None
        sys.modules["mesh_client._src.wire._frames"] = None
    if sys.argv[1] == "stale":  # a _waits built from older sources (a checkout pulled, not reinstalled)
        import types
        sys.modules["mesh_client._src.runtime._waits"] = types.ModuleType("mesh_client._src.runtime._waits")
    from mesh_client import Actor, endpoint, this_host
    from mesh_client._src.runtime import waits

    class Echo(Actor):
        @endpoint
        def echo(self, value):
            return value

    with this_host().spawn_procs(per_host={"gpus": 2}, name="first") as procs:  # the line warned at
        print("first", sorted(procs.spawn("echo", Echo).echo.call(7).get().values()))
    with this_host().spawn_procs(per_host={"gpus": 2}, name="second") as procs:  # a line of its own
        print("second", sorted(procs.spawn("echo", Echo).echo.call(7).get().values()))
    print("spinning", waits.native is not None)
    """
)
NESTED = textwrap.dedent(
    """
    import sys
    from mesh_client import Actor, endpoint, this_host
    from mesh_client._src.runtime import natives

    class Inner(Actor):
        @endpoint
        def echo(self, value):
            return value

    class Outer(Actor):
        @endpoint
        def nest(self):  # a proc mesh made in a proc server
            inner = this_host().spawn_procs(per_host={"gpus": 1}, name="inner")
            print("inner spawned", file=sys.stderr, flush=True)  # the proc's stderr reaches the terminal
            value = inner.spawn("inner", Inner).echo.call_one(7).get()
            inner.stop().get()
            return natives.missing, value

    with this_host().spawn_procs(per_host={"gpus": 1}, name="outer") as procs:  # the line warned at
        missing, value = procs.spawn("outer", Outer).nest.call_one().get()
        print("nested", missing, value)
    """
)
STRICT = textwrap.dedent(
    """
    import os, sys, time
    sys.modules["mesh_client._src.runtime._waits"] = None
    sys.modules["mesh_client._src.runtime._sends"] = None
    sys.modules["mesh_client._src.wire._frames"] = None
    from mesh_client import this_host

    pids = sys.argv[1]
    def note_pid():
        with open(os.path.join(pids, str(os.getpid())), "w"):
            pass

    try:
        this_host().spawn_procs(per_host={"gpus": 2}, bootstrap=note_pid)
    except RuntimeWarning as e:
        print("raised", "C compiler" in str(e))

    def running(pid):
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return False
        return True

    started = os.listdir(pids)
    print("procs", len(started))
    deadline = time.monotonic() + 60
    while any(running(p) for p in started) and time.monotonic() < deadline:
        time.sleep(0.1)
    print("stopped" if not any(running(p) for p in started) else "left running")
    """
)
ASYNC = textwrap.dedent(
    """
    import asyncio, sys
    sys.modules["mesh_client._src.runtime._waits"] = None
    sys.modules["mesh_client._src.runtime._sends"] = None
    sys.modules["mesh_client._src.wire._frames"] = None
    from mesh_client import this_host

    async def main():
        procs = await this_host().spawn_procs_async(per_host={"gpus": 1}, name="spawned")  # warned
        await procs.stop()
        print("stopped")

    asyncio.run(main())
    """
)
WARNED = "procmesh: the native call-path modules"


def run_controller(tmp_path: Path, mode: str, source: str = CONTROLLER, path: str = ROOT,
                   options: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "controller.py"
    script.write_text(source)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}  # Python's default filters
    env["PYTHONPATH"] = path
    done = subprocess.run([sys.executable, *options, str(script), mode], capture_output=True, text=True,
                          cwd=path, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def test_a_controller_without_the_native_modules_warns_once_and_works(tmp_path):
    done = run_controller(tmp_path, "blocked")
    assert done.stdout.splitlines() == ["first [7, 7]", "second [7, 7]", "spinning False"]
    assert done.stderr.count(WARNED) == 1, done.stderr
    lines = done.stderr.splitlines()
    at = next(i for i, line in enumerate(lines) if WARNED in line)
    line = lines[at]
    assert "controller.py:" in line and "RuntimeWarning" in line
    assert 'name="first"' in lines[at + 1]  # warnings shows the source line warned at: the user's first spawn
    assert "_waits, _sends, _frames" in line and "1.6x" in line and "C compiler" in line and "reinstall" in line


def test_a_native_module_built_from_older_sources_is_left_unused_and_named(tmp_path):
    done = run_controller(tmp_path, "stale")
    assert done.stdout.splitlines() == ["first [7, 7]", "second [7, 7]", "spinning False"]
    assert done.stderr.count(WARNED) == 1, done.stderr
    line = next(line for line in done.stderr.splitlines() if WARNED in line)
    assert "modules _waits are" in line and "built from older sources" in line and "reinstall" in line


def test_a_controller_with_the_native_modules_warns_nothing(tmp_path):
    done = run_controller(tmp_path, "loaded")
    assert done.stdout.splitlines() == ["first [7, 7]", "second [7, 7]", "spinning True"]
    assert WARNED not in done.stderr


def test_a_proc_server_without_the_native_modules_warns_nothing(tmp_path):
    # An install without a C compiler: its proc servers lack the modules too (they import the
    # copy, as the controller does).
    install = tmp_path / "install"
    shutil.copytree(Path(ROOT) / "mesh_client", install / "mesh_client",
                    ignore=shutil.ignore_patterns("*.so", "*.pyd", "__pycache__"))
    done = run_controller(tmp_path, "copy", NESTED, str(install))
    assert done.stdout.splitlines() == ["nested ['_waits', '_sends', '_frames'] 7"]  # the proc's own modules missing
    assert "[outer rank 0] inner spawned" in done.stderr, done.stderr
    assert done.stderr.count(WARNED) == 1, done.stderr
    line = next(line for line in done.stderr.splitlines() if WARNED in line)
    assert line.startswith(str(tmp_path / "controller.py:")), line  # the controller's, no proc's prefix


def test_a_warning_made_an_error_stops_the_procs_of_the_spawn_it_fails(tmp_path):
    pids = tmp_path / "pids"
    pids.mkdir()
    done = run_controller(tmp_path, str(pids), STRICT, options=("-W", "error::RuntimeWarning"))
    assert done.stdout.splitlines() == ["raised True", "procs 2", "stopped"], done.stderr


def test_an_async_controller_is_warned_at_its_own_line(tmp_path):
    done = run_controller(tmp_path, "blocked", ASYNC)
    assert done.stdout.splitlines() == ["stopped"]
    lines = done.stderr.splitlines()
    at = [i for i, line in enumerate(lines) if WARNED in line]
    assert len(at) == 1 and lines[at[0]].startswith(str(tmp_path / "controller.py:")), done.stderr
    assert 'name="spawned"' in lines[at[0] + 1]
