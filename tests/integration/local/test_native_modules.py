"""An install that could not build the call path's C modules (no C compiler) works, slower, and
says so: one warning, at the program's first proc mesh, naming what is missing and what to do.

Aspects:
- a controller whose import of _waits, _sends and _frames fails (a ``None`` in ``sys.modules``, as
  Python's import system reads it: the module cannot be imported) warns once over two meshes
  spawned at two lines, at the first (the user's own line), and its calls work;
- a controller with the modules loaded (as this checkout is built) warns nothing.
"""

import os
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
WARNED = "procmesh: the native call-path modules"


def run_controller(tmp_path: Path, mode: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "controller.py"
    script.write_text(CONTROLLER)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}  # Python's default filters
    env["PYTHONPATH"] = ROOT
    done = subprocess.run([sys.executable, str(script), mode], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=120)
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


def test_a_controller_with_the_native_modules_warns_nothing(tmp_path):
    done = run_controller(tmp_path, "loaded")
    assert done.stdout.splitlines() == ["first [7, 7]", "second [7, 7]", "spinning True"]
    assert WARNED not in done.stderr
