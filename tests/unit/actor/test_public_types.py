"""What a user's type checker sees (mypy, through ``py.typed``): spawn gives the actor class,
each endpoint's adverbs check their arguments and give one return type each, send and
Accumulator take an endpoint, and the mesh operations (slice, initialized, stop) are there.

Aspects: a well-typed controller program passes; a wrong argument type, a wrong keyword and
a misuse of a result are each reported at their line.
"""

import textwrap

from mypy import api

PROGRAM = textwrap.dedent(
    """
    from mesh_client import Accumulator, Actor, Future, ValueMesh, endpoint, send, this_host

    class Counter(Actor):
        @endpoint
        def add(self, n: int) -> int:
            return n

        @endpoint
        async def name(self, prefix: str = "") -> str:
            return prefix

    procs = this_host().spawn_procs(per_host={"gpus": 2})
    counters = procs.spawn("c", Counter)
    everywhere: Future[ValueMesh[int]] = counters.add.call(1)
    one: int = counters.slice(gpus=0).add.call_one(2).get()
    text: str = counters.name.choose(prefix="a").get()
    total: Future[int] = Accumulator(counters.add, 0, lambda a, b: a + b).accumulate(3)
    send(counters.add, (1,), {})
    pids: Future[list[int]] = procs.run(lambda: 1)
    counters.initialized.get()
    counters.stop().get()
    """
)


def check(tmp_path, source: str) -> list[str]:
    """mypy --strict's errors in ``source`` (a user's program; not the project's own config)."""
    program = tmp_path / "program.py"
    program.write_text(source)
    config = tmp_path / "mypy.ini"
    config.write_text("[mypy]\nignore_missing_imports = True\n")
    out, err, _ = api.run(["--config-file", str(config), "--strict", "--no-error-summary", str(program)])
    assert "error:" in out or not err, err
    return [line for line in out.splitlines() if ": error:" in line]


def test_a_well_typed_program_passes(tmp_path):
    assert check(tmp_path, PROGRAM) == []


def test_mistakes_are_reported_at_their_line(tmp_path):
    errors = check(
        tmp_path,
        PROGRAM
        + 'counters.add.call("one")\n'
        + "counters.name.call_one(suffix='x')\n"
        + "wrong: str = counters.add.call_one(1).get()\n"
        + "Accumulator(counters.add, 0, lambda a, b: a + b).accumulate('x')\n"
        + "names: Future[list[int]] = procs.run(lambda: 'x')\n",
    )
    lines = len(PROGRAM.splitlines())
    assert sorted({int(e.split(":")[1]) for e in errors}) == [lines + 1, lines + 2, lines + 3, lines + 4, lines + 5], errors
