"""A Ctrl-C that a finalizer swallows is raised at the next poll of a client's wait.

Aspects: in a real interpreter, a SIGINT whose KeyboardInterrupt lands in a ``__del__`` (Python
prints "Exception ignored" and goes on) is raised by the wait's next ``offloading.sleep``, after
the wait's hook ran (the progress line ends first); without ``kept`` it is lost, as before. The
handler is Python's again after the block; a SIGINT that is ignored, or handled by the user's
own handler, is left as it is; nested blocks keep the outer one's handler.
"""

import os
import pathlib
import signal
import subprocess
import sys
import textwrap

import pytest

from mesh_client._src.runtime import interrupts, offloading

ROOT = pathlib.Path(__file__).resolve().parents[3]

PROGRAM = textwrap.dedent("""
    import signal, sys
    from mesh_client._src.runtime import interrupts, offloading

    class Dropped:
        def __del__(self):
            signal.raise_signal(signal.SIGINT)  # the handler runs inside this finalizer

    def wait():
        Dropped()
        print("went on after the swallowed interrupt", flush=True)
        offloading.sleep(0.01)
        print("slept through it", flush=True)

    if sys.argv[1] == "kept":
        with interrupts.kept(before_raise=lambda: print("line ended", file=sys.stderr, flush=True)):
            wait()
    else:
        wait()
""")


def run(mode: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", PROGRAM, mode], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=str(ROOT),
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def test_a_swallowed_ctrl_c_is_raised_at_the_next_poll():
    done = run("kept")
    assert "Exception ignored" in done.stderr, done.stderr  # Python did swallow it
    assert "went on after the swallowed interrupt" in done.stdout
    assert "slept through it" not in done.stdout, done.stdout
    assert done.returncode != 0 and done.stderr.rstrip().endswith("KeyboardInterrupt"), done.stderr
    assert done.stderr.index("line ended") < done.stderr.index("Exception ignored")


def test_without_kept_python_loses_it():
    done = run("plain")
    assert "Exception ignored" in done.stderr, done.stderr
    assert "slept through it" in done.stdout and done.returncode == 0, (done.stdout, done.stderr)


@pytest.fixture
def pythons_sigint():
    """SIGINT as a terminal's program has it, whatever the runner of these tests inherited."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_the_handler_is_pythons_again_after_the_block(pythons_sigint):
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    with interrupts.kept():
        assert signal.getsignal(signal.SIGINT) is not signal.default_int_handler
        with interrupts.kept():  # nested: the outer block's handler stays
            inner = signal.getsignal(signal.SIGINT)
        assert signal.getsignal(signal.SIGINT) is inner
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    offloading.sleep(0)  # the interrupt that was raised normally is not raised again


@pytest.mark.parametrize("other", [signal.SIG_IGN, "own"])
def test_an_ignored_or_own_sigint_is_left_alone(other):
    calls = []
    handler = (lambda signum, frame: calls.append(signum)) if other == "own" else other
    previous = signal.signal(signal.SIGINT, handler)
    try:
        with interrupts.kept():
            assert signal.getsignal(signal.SIGINT) is handler
            signal.raise_signal(signal.SIGINT)
            interrupts.check()  # nothing recorded: nothing raised
        assert calls == ([signal.SIGINT] if other == "own" else [])
    finally:
        signal.signal(signal.SIGINT, previous)
