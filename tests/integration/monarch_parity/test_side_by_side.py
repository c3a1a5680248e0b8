"""The same small programs on torchmonarch 0.7 and on mesh_client give the same outcomes.

Aspects, one scenario each (see :mod:`.programs`): a broadcast endpoint that raises; a failing
__init__; a proc killed with -9; __supervise__ handling a child's failure; an unhandled failure
climbing to the client; an actor mixing def and async def endpoints; the remaining names
(concurrent_endpoint, explicit response ports, Channel, Accumulator, get_or_spawn_controller,
current_actor_name, str(current_rank()), is_fake_in_process, str(actor_mesh)); what actors print;
what a probe porting Monarch programs found (Port.exception's exception raised as itself, from
the controller, an actor and an explicit response port; Channel.open_ranked with send;
Future.as_asyncio; split on proc, actor and value meshes, and its errors); Actor.logger (its
name, level and lines, also from __cleanup__); ProcMesh.logging_option (a coroutine setting every
proc's root level, checking its arguments); a program between enable_transport("ipc") and
shutdown_context(); returns_future, Uid, ProcId, ChannelTransport, config, span, traced and
get_meter.

Round two (:mod:`.round_two`, one scenario each): ValueMesh operations (items, values, iteration
order, slice, flatten, rename, size, item and their errors); slicing actor meshes by dimension
names, and what current_rank, current_size and context().message_rank say in a slice; choose,
stream and broadcast; call_one on several actors; arguments checked against the endpoint's
parameters at the call (defaults, *args, keyword-only, **kwargs; TypeError on every adverb and
send); custom exceptions and chained causes; calls after stop(); Future.get(timeout=); a proc
mesh's and a host's ``initialized``; spawn_procs shapes and str(extent); actors spawning actors,
and actor meshes and slices passed as arguments; Accumulator; Channel, Port and PortReceiver
(ordering per sender, once ports, timeouts); send with a selection and keyword arguments; an
endpoint returning a generator; async endpoints awaiting other actors and taking a ValueMesh;
methods that are not endpoints; current_rank outside an actor; spawn's arguments checked
against __init__; repr of value meshes and points, and a point compared with a dict; stream order; a future read twice; an
actor stopping itself; broadcast with keyword arguments; Future() made by hand; an actor that
raises under call, stream and Accumulator, and as_endpoint on a plain method.

Round three (:mod:`.round_three`): torchrun-style SPMD, ``setup_torch_elastic_env`` (also on a
slice, and its async twin) and ``SPMDActor.main`` running a script, on meshes with and without
``hosts``: the same ranks, sizes and groups in every proc, and the same gloo all_reduce.

Round four (:mod:`.round_four`): ``ProcMesh.to_table`` (two and three dimensions, slices, and its
errors), ``ProcMesh.host_mesh`` (one proc, several, in the client and in an actor, spawning beside a
proc), ``this_host().stop()`` / ``shutdown()`` / ``sync_workspace`` and ``ProcMesh.sync_workspace``,
``Port.return_undeliverable``, and an owned host mesh (``attach_to_workers``): ``spawn_procs()``
without ``per_host``, ``stop()`` twice and spawning after it, ``async with`` on it (a shutdown at
the end) and on a proc mesh, and what ``shutdown()``, ``stop()``, ``spawn_procs`` and ``async
with`` do after its shutdown; ``async with this_host()``.

torchmonarch comes with the ``bench`` extra (``pip install 'procmesh[bench]'``); without it
these tests fail and say so. Monarch runs its own processes on this machine, over loopback.
"""

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

PROGRAMS = Path(__file__).with_name("programs.py")
ROUND_TWO = Path(__file__).with_name("round_two.py")
ROUND_THREE = Path(__file__).with_name("round_three.py")
ROUND_FOUR = Path(__file__).with_name("round_four.py")
SCENARIOS = [
    "broadcast_error", "failing_init", "proc_death", "supervise", "unhandled_climbs", "mixed_endpoints", "names", "output", "ported",
    "logger", "logging_option", "transport_shutdown", "more_names",
]
ROUND_TWO_SCENARIOS = [
    "valuemesh", "mesh_slicing", "choose_stream", "call_one_many", "kwargs", "exceptions", "stop_then_call",
    "future_timeout", "initialized", "shapes", "actors_spawn_actors", "accumulate", "channels", "send_selection",
    "generators", "async_calls", "not_endpoint", "current_outside", "spawn_args", "reprs", "stream_order",
    "future_twice", "self_stop", "broadcast_kwargs", "failures_in_adverbs",
]


def outcome(api: str, scenario: str, programs: Path = PROGRAMS) -> tuple[dict, list[str], list[str]]:
    """The outcome line, and the other lines of stdout and stderr (Monarch's own notice left out)."""
    env = dict(os.environ)
    # Unbuffered, Monarch's procs write a print's text and its newline apart, and two procs
    # printing at once interleave inside a line; ours write whole lines either way
    # (tests/integration/local/test_whole_lines.py). Compare the lines, not that race.
    env.pop("PYTHONUNBUFFERED", None)
    done = subprocess.run(
        [sys.executable, str(programs), api, scenario], capture_output=True, text=True, timeout=300, env=env, cwd=programs.parent
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("OUTCOME ")]
    assert lines, f"{api} {scenario} printed no outcome (exit {done.returncode}):\n{done.stdout}\n{done.stderr[-3000:]}"
    out = [line for line in done.stdout.splitlines() if not line.startswith("OUTCOME ")]
    err = [line for line in done.stderr.splitlines() if line.strip() and "Monarch internal logs" not in line]
    return json.loads(lines[-1][len("OUTCOME ") :]), out, err


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_same_outcome_as_monarch(scenario):
    assert importlib.util.find_spec("monarch") is not None, "torchmonarch 0.7 is needed: pip install 'procmesh[bench]'"
    theirs, their_out, their_err = outcome("monarch.actor", scenario)
    ours, our_out, our_err = outcome("mesh_client.actor", scenario)
    assert ours == theirs
    if scenario in ("output", "logger"):
        # An actor's prints: the same lines, ours each led by the proc's name, which Monarch 0.7's
        # local procs do not print (README, "Deliberate differences"); PROCMESH_FORWARD_OUTPUT=0
        # gives its bare lines.
        prefix = re.compile(r"^\[procs\d+ rank [01]\] ")
        assert all(prefix.match(line) for line in our_out + our_err), (our_out, our_err)
        bare = [prefix.sub("", line) for line in our_out], [prefix.sub("", line) for line in our_err]
        assert (sorted(bare[0]), sorted(bare[1])) == (sorted(their_out), sorted(their_err))


@pytest.mark.parametrize("scenario", ROUND_TWO_SCENARIOS)
def test_round_two_same_outcome_as_monarch(scenario):
    assert importlib.util.find_spec("monarch") is not None, "torchmonarch 0.7 is needed: pip install 'procmesh[bench]'"
    theirs = outcome("monarch.actor", scenario, ROUND_TWO)[0]
    assert outcome("mesh_client.actor", scenario, ROUND_TWO)[0] == theirs


@pytest.mark.parametrize("scenario", ["spmd", "spmd_main"])
def test_round_three_same_outcome_as_monarch(scenario):
    assert importlib.util.find_spec("monarch") is not None, "torchmonarch 0.7 is needed: pip install 'procmesh[bench]'"
    theirs = outcome("monarch.actor", scenario, ROUND_THREE)[0]
    assert outcome("mesh_client.actor", scenario, ROUND_THREE)[0] == theirs


@pytest.mark.parametrize("scenario", ["tables", "host_mesh", "host_lifecycle", "port_flags", "owned_hosts"])
def test_round_four_same_outcome_as_monarch(scenario):
    assert importlib.util.find_spec("monarch") is not None, "torchmonarch 0.7 is needed: pip install 'procmesh[bench]'"
    theirs = outcome("monarch.actor", scenario, ROUND_FOUR)[0]
    assert outcome("mesh_client.actor", scenario, ROUND_FOUR)[0] == theirs
