"""Remote tracebacks name the controller's file, line and source line (issue 15, item 7).

Aspects: an actor class defined in the controller's ``__main__`` script (pickled by value) raises
in an endpoint after the script file was deleted, so the proc cannot read it: the caller's error
still shows ``File "<script>", line N, in go`` and the source line, from the text shipped with
the spawn; a function of the script sent in a later call to that proc is shown the same way, and
so is a bootstrap of the script that raises in a fresh proc (its text rides with the bootstrap).
"""

import os
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent('''
    import os
    from mesh_client import Actor, endpoint, this_host


    class Boom(Actor):
        @endpoint
        def go(self, x):
            y = x + 1
            raise ValueError(f"boom {y}")

        @endpoint
        def run(self, fn):
            return fn()


    def helper():
        return 1 / 0


    def bad_bootstrap():
        raise RuntimeError("no such device")


    procs = this_host().spawn_procs(per_host={"gpus": 1})
    boom = procs.spawn("boom", Boom)
    os.remove(__file__)  # from here on the file exists nowhere
    for call in (lambda: boom.go.call_one(1), lambda: boom.run.call_one(helper)):
        try:
            call().get()
        except Exception as exc:
            print(str(exc))
            print("----")
    procs.stop().get()
    try:
        this_host().spawn_procs(per_host={"gpus": 1}, bootstrap=bad_bootstrap)
    except Exception as exc:
        print(str(exc))
''')


def test_a_script_actors_traceback_shows_its_file_and_lines(tmp_path):
    script = tmp_path / "controller_script.py"
    script.write_text(SCRIPT)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path, env=dict(os.environ))
    assert done.returncode == 0, done.stderr
    assert not script.exists()
    first, second, third = done.stdout.split("----")
    assert f'File "{script}", line 10, in go\n    raise ValueError(f"boom {{y}}")' in first
    assert "ValueError: boom 2" in first and "<dynamic-code>" not in first
    assert f'File "{script}", line 18, in helper\n    return 1 / 0' in second
    assert f'File "{script}", line 22, in bad_bootstrap\n    raise RuntimeError("no such device")' in third
