"""What procs print reaches the controller's stdout in whole lines, even unbuffered.

Under ``PYTHONUNBUFFERED=1`` a ``print`` is two writes (text, then newline); procs sharing the
controller's stdout then interleaved inside lines ("hello...hello...\\n\\n"), which Monarch never
shows. The controller runs in a subprocess whose stdout is a pipe, as under CI or a pager.
"""

import os
import subprocess
import sys
import textwrap

PROGRAM = textwrap.dedent('''
    from mesh_client.actor import Actor, endpoint, this_host

    class Chatty(Actor):
        @endpoint
        def chat(self, lines: int) -> None:
            for _ in range(lines):
                print("a whole line from an actor " + "x" * 40, flush=True)

    if __name__ == "__main__":
        procs = this_host().spawn_procs(per_host={"gpus": 4})
        procs.spawn("chatty", Chatty).chat.call(300).get()
        procs.stop().get()
''')


def test_procs_printing_at_once_never_split_a_line():
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    done = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    expected = [f"[procs{n} rank {r}] a whole line from an actor " + "x" * 40
                for n in range(10) for r in range(4)]  # the mesh's default name: procs<n>
    assert [line for line in lines if line not in expected] == []
    assert len(lines) == 4 * 300
    assert len({line.split("]")[0] for line in lines}) == 4  # every proc, each with its prefix
