"""Actor classes shared by the local integration tests (importable by the proc servers)."""

import asyncio
import os
import sys
import time

from mesh_client import (
    Actor,
    concurrent_endpoint,
    context,
    current_actor_name,
    current_rank,
    current_size,
    endpoint,
    this_host,
)


def wait_for_file(path: str, limit: float = 60.0) -> bool:
    """Return once ``path`` exists (True), or False after ``limit`` seconds: a test's gate,
    opened by creating the file; bounded, so a test that would hang fails instead."""
    deadline = time.monotonic() + limit
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


class Recorder(Actor):
    """Echoes, records the order of messages, and reports where it runs."""

    def __init__(self, tag: str = "r") -> None:
        self.tag = tag
        self.seen: list = []

    @endpoint
    def echo(self, value):
        return value

    @endpoint
    def record(self, value) -> int:
        self.seen.append(value)
        return len(self.seen)

    @endpoint
    def history(self) -> list:
        return self.seen

    @endpoint
    def where(self) -> dict:
        inst = context().actor_instance
        return {
            "pid": os.getpid(),
            "message_rank": dict(current_rank()),
            "size": current_size(),
            "rank": dict(inst.rank),
            "env": {k: v for k, v in os.environ.items() if k.startswith("TEST_")},
            "torch_loaded": "torch" in sys.modules,
            "tag": self.tag,
        }

    @endpoint
    def sleep(self, seconds: float) -> float:
        time.sleep(seconds)
        return seconds

    @endpoint
    def wait_for(self, path: str, limit: float = 60.0) -> bool:
        """A call held in flight for exactly as long as a test needs, whatever the machine's
        load (see wait_for_file)."""
        return wait_for_file(path, limit)

    @endpoint
    def fail(self, message: str) -> None:
        raise KeyError(message)

    def not_an_endpoint(self) -> None:
        pass


class Lingering(Actor):
    """Holds its proc's shutdown open in an atexit handler (the proc's finalizers run after its
    actors are stopped) until a test opens the gate."""

    @endpoint
    def linger_at_exit(self, started: str, release: str) -> int:
        import atexit

        def linger() -> None:
            open(started, "w").close()
            wait_for_file(release)

        atexit.register(linger)
        return os.getpid()


class Orderly(Actor):
    """Logs, to a file, when each call and its ``__cleanup__`` start and end, and whether the
    cleanup had run when a call ran (an actor handles one message at a time)."""

    def __init__(self, log: str) -> None:
        self.log = log
        self.cleaned = False

    def _note(self, what: str) -> None:
        with open(self.log, "a") as f:
            f.write(f"{what} cleaned={self.cleaned}\n")

    @endpoint
    def work(self, i: int, gate: str) -> int:
        self._note(f"start {i}")
        wait_for_file(gate)
        self._note(f"end {i}")
        return i

    def __cleanup__(self, exc: BaseException | None) -> None:
        self._note("cleanup")
        self.cleaned = True


class AsyncOrderly(Actor):
    """An async actor whose call awaits until a gate opens; logs as Orderly does."""

    def __init__(self, log: str) -> None:
        self.log = log

    @endpoint
    async def work(self, gate: str) -> str:
        with open(self.log, "a") as f:
            f.write("start\n")
        try:
            while not os.path.exists(gate):
                await asyncio.sleep(0.005)
        except asyncio.CancelledError:
            with open(self.log, "a") as f:
                f.write("cancelled\n")
            raise
        return "opened"

    async def __cleanup__(self, exc: BaseException | None) -> None:
        with open(self.log, "a") as f:
            f.write("cleanup\n")


class Caller(Actor):
    """Calls another actor mesh that it was handed, from its own proc."""

    @endpoint
    def relay(self, other, value):
        return {"from_pid": os.getpid(), "answers": list(other.echo.call(value).get().values())}



class AsyncCaller(Actor):
    """Awaits another actor mesh from its own proc (all endpoints async, as Monarch requires)."""

    @endpoint
    async def relay_async(self, other, value):
        return await other.slice(hosts=0, gpus=0).echo.call_one(value)


class Adder(Actor):
    """Async endpoints only."""

    @endpoint
    async def add_later(self, a: int, b: int) -> int:
        await asyncio.sleep(0.01)
        return a + b


class Mixed(Actor):
    """Mixes def and async def endpoints: refused unless options.mixed_endpoints."""

    @endpoint
    def sync_one(self) -> int:
        return 1

    @endpoint
    async def async_one(self) -> int:
        return 2


class FailingInit(Actor):
    def __init__(self) -> None:
        raise RuntimeError("cannot build the model")

    @endpoint
    def ping(self) -> str:
        return "never"


class Unpicklable(Exception):
    def __reduce__(self):
        raise TypeError("not picklable")


class RaisesUnpicklable(Actor):
    @endpoint
    def go(self) -> None:
        raise Unpicklable("secret state")


def raise_value_error():
    raise ValueError("Error.")


class CodeError(Exception):
    """A user's exception with a broken ``__str__`` (it returns the int it was given)."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code

    def __str__(self):
        return self.code


def raise_code_error():
    raise CodeError(7)


class QuotaExceeded(Exception):
    """Pickles as its message alone, so its two-argument ``__init__`` cannot be called again."""

    def __init__(self, user: str, limit: int) -> None:
        super().__init__(f"user {user} is over the quota of {limit}")


def raise_quota_exceeded():
    raise QuotaExceeded("alice", 10)


def proc_only_class():
    """A class of a module that exists only in the proc that calls this."""
    import sys
    import types

    module = sys.modules.setdefault("proc_only_module", types.ModuleType("proc_only_module"))
    if not hasattr(module, "ProcOnly"):
        exec("class ProcOnly(Exception):\n    pass\n", module.__dict__)
    return module.ProcOnly


def raise_proc_only():
    raise proc_only_class()("only here")


def return_proc_only():
    return proc_only_class()("a value")


def return_lock():
    import threading

    return threading.Lock()


class ConcurrentLock(Actor):
    """A concurrent endpoint whose result cannot be pickled."""

    @concurrent_endpoint
    async def concurrently(self):
        return return_lock()


class LockReturns(Actor):
    """An endpoint whose result cannot be pickled (run by a broadcast, nobody asks for it)."""

    @endpoint
    def plainly(self):
        return return_lock()

    @endpoint
    def ping(self) -> str:
        return "pong"


class Forwards(Actor):
    """Calls a Lambda mesh it was handed and lets its error propagate."""

    @endpoint
    def forward(self, other, fn):
        return other.run.call_one(fn).get(timeout=60)


class Collides(Actor):
    """Endpoints named as an actor mesh's own attributes: unreachable as mesh.size, mesh.stop."""

    @endpoint
    def size(self) -> int:
        return 1

    @endpoint
    def stop(self) -> None:
        pass


class Lambda(Actor):
    """Runs the function it is sent (so a test chooses what happens in the actor)."""

    @endpoint
    def run(self, fn):
        return fn()


class Nest(Actor):
    """Owns a one-proc mesh of Lambda actors; without __supervise__ their failures become its own."""

    def __init__(self) -> None:
        self.nest = this_host().spawn_procs(per_host={"a_dim": 1}).spawn("nested", Lambda)

    @endpoint
    def nested(self, fn) -> None:
        self.nest.run.broadcast(fn)

    @endpoint
    def nested_call_one(self, fn):
        return self.nest.run.call_one(fn).get()

    @endpoint
    def kill_nest(self) -> None:
        pid = self.nest.run.call_one(os.getpid).get()
        os.kill(pid, 9)


class SuperviseNest(Nest):
    """Handles the failures of its nest and remembers them."""

    def __init__(self) -> None:
        super().__init__()
        self.failures: list = []

    def __supervise__(self, failure) -> bool:
        self.failures.append((failure.mesh_name, failure.crashed_ranks, failure.report()))
        return True

    @endpoint
    def seen(self) -> list:
        return self.failures


class Concurrent(Actor):
    """A concurrent endpoint that waits for a later message of the same actor."""

    def __init__(self) -> None:
        self.opened = asyncio.Event()

    @concurrent_endpoint
    async def wait_for_open(self) -> str:
        await self.opened.wait()
        return "opened"

    @endpoint
    async def open(self) -> None:
        self.opened.set()


class AsyncExits(Actor):
    """Async endpoints that fail: with an exception, or with SystemExit (``sys.exit()``)."""

    @endpoint
    async def fail(self, message: str) -> None:
        raise KeyError(message)

    @endpoint
    async def exit_now(self, code: int) -> None:
        sys.exit(code)

    @concurrent_endpoint
    async def exit_concurrently(self, code: int) -> None:
        sys.exit(code)

    @endpoint
    async def ping(self) -> str:
        return "pong"


class Ports(Actor):
    """Replies through explicit ports and sends to ports it was handed."""

    @endpoint(explicit_response_port=True)
    def later(self, port, value) -> None:
        port.send(value * 2)

    @endpoint(explicit_response_port=True)
    def refuse(self, port) -> None:
        port.exception(ValueError("refused"))

    @endpoint
    def tell(self, port, value) -> None:
        port.send((str(current_rank()), value))

    @endpoint
    def fail_to(self, port, text) -> None:
        port.exception(KeyError(text))

    @endpoint
    def name(self) -> str:
        return current_actor_name()

    @endpoint
    def rank(self) -> int:
        return current_rank().rank


class _WritesOnFinalize:
    def __init__(self, path: str) -> None:
        self._file = open(path, "w")  # opened now: open() may be gone at finalization

    def __del__(self) -> None:
        self._file.write("finalized")
        self._file.close()


_sentinel = None


class FinalizerActor(Actor):
    """Keeps an object with a __del__ in a module global, to be finalized when its proc ends."""

    def __init__(self, path: str) -> None:
        global _sentinel
        _sentinel = _WritesOnFinalize(path)

    @endpoint
    def pid(self) -> int:
        return os.getpid()


class Logs(Actor):
    """Logs through a handler of its own and says how it is named."""

    @endpoint
    def log_line(self) -> tuple:
        import io
        import logging

        stream = io.StringIO()
        handler = logging.StreamHandler(stream)
        handler.setFormatter(logging.Formatter("%(message)s"))
        logger = logging.getLogger("tests.capture")
        logger.addHandler(handler)
        try:
            logger.error("HUH")
        finally:
            logger.removeHandler(handler)
        instance = context().actor_instance
        return stream.getvalue(), str(instance), instance.creator.name


class CallsItself(Actor):
    """Calls the actor mesh it is handed (its own, or a slice of it) from its endpoints."""

    @endpoint
    def ask(self, mesh, how: str):
        if how == "call_one":
            return mesh.ask_back.call_one().get()
        if how == "call":
            return list(mesh.ask_back.call().get().values())
        if how == "choose":
            return mesh.ask_back.choose().get()
        if how == "not waited":  # runs after this message: fine
            mesh.ask_back.call_one()
            return "sent"
        if how == "stream":  # the other actors' replies come; its own never would
            return sorted(fut.get() for fut in mesh.ask_back.stream())
        raise ValueError(how)

    @endpoint
    def ask_back(self) -> int:
        return current_rank().rank


class AsyncCallsItself(Actor):
    """As CallsItself, with async endpoints: a get() there blocks the actor's loop."""

    @endpoint
    async def ask(self, mesh):
        return mesh.ask_back.call_one().get()

    @endpoint
    async def ask_back(self) -> int:
        return current_rank().rank


class AsyncAwaitsItself(Actor):
    """Awaits calls to the actor mesh it is handed (its own, or a slice of it): in an endpoint,
    which its thread waits for, or in a concurrent endpoint, which it does not."""

    @endpoint
    async def ask(self, mesh, how: str):
        if how == "call_one":
            return await mesh.ask_back.call_one()
        if how == "call":
            return list((await mesh.ask_back.call()).values())
        if how == "stream":
            return sorted([await fut for fut in mesh.ask_back.stream()])
        if how == "in a task of its own":  # not refused: the task could end (here the caller's timeout ends it)
            return await asyncio.wait_for(asyncio.ensure_future(mesh.ask_back.call_one()), 0.5)
        raise ValueError(how)

    @concurrent_endpoint
    async def ask_concurrently(self, mesh):
        return await mesh.ask_back.call_one()

    @endpoint
    async def ask_back(self) -> int:
        return current_rank().rank


class MixedCallsItself(Actor):
    """Mixes kinds (options.mixed_endpoints): its concurrent endpoint may wait for its own def
    endpoint, which its thread serves meanwhile; its other endpoints may not."""

    @concurrent_endpoint
    async def ask(self, mesh):
        return mesh.ask_back.call_one().get(timeout=60)

    @endpoint
    async def ask_held(self, mesh, how: str):
        if how == "await":
            return await mesh.ask_back.call_one()
        return mesh.ask_back.call_one().get()

    @endpoint
    def ask_from_def(self, mesh):
        return mesh.ask_back.call_one().get()

    @endpoint
    def ask_back(self) -> int:
        return 7


class Tally(Actor):
    """Counts what it is told (the __cleanup__ of other actors reports here)."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    @endpoint
    def note(self, what: str) -> None:
        self.seen.append(what)

    @endpoint
    def notes(self) -> list[str]:
        return list(self.seen)


class CleansUp(Actor):
    """Tells a Tally when its __cleanup__ runs."""

    def __init__(self, tally, label: str) -> None:
        self.tally = tally
        self.label = label

    @endpoint
    def pid(self) -> int:
        return os.getpid()

    def __cleanup__(self, exc) -> None:
        self.tally.note.call_one(f"cleanup {self.label}").get(timeout=60)


class Parent(Actor):
    """Makes children: an actor mesh on procs it is given, procs of its own and an actor mesh on them."""

    def __init__(self, procs, tally) -> None:
        self.tally = tally
        self.on_given = procs.spawn("on_given", CleansUp, tally, "on given procs")
        self.own_procs = this_host().spawn_procs(per_host={"gpus": 1}, name="own")
        self.on_own = self.own_procs.spawn("on_own", CleansUp, tally, "on own procs")

    @endpoint
    def own_pid(self) -> int:
        return self.on_own.pid.call_one().get(timeout=60)

    @endpoint
    def end(self, how: str, reason: str) -> str:
        getattr(context().actor_instance, how)(reason)
        return "asked"

    def __cleanup__(self, exc) -> None:  # its children still answer here
        self.tally.note.call_one(f"parent cleanup, child pid {self.on_own.pid.call_one().get(timeout=60)}").get(timeout=60)


class Ends(Actor):
    """Stops or aborts itself when asked (Monarch's context().actor_instance.stop/abort)."""

    @endpoint
    def end(self, how: str, reason: str) -> str:
        getattr(context().actor_instance, how)(reason)
        return "asked"

    @endpoint
    def echo(self, value):
        return value


class AwaitsItsChildren(Actor):
    """An async owner whose endpoint waits for the failure of the child it made (handled by its
    __supervise__ meanwhile, as in Monarch)."""

    def __init__(self, procs) -> None:
        self.procs = procs
        self.seen: list[str] = []

    def __supervise__(self, failure) -> bool:
        self.seen.append(failure.mesh_name.split("-")[0])
        return True

    @endpoint
    async def make_one_abort(self) -> list[str]:
        import asyncio

        child = self.procs.spawn("aborting", Ends)
        await child.end.call("abort", "giving up")
        for _ in range(600):
            if self.seen:
                break
            await asyncio.sleep(0.1)
        return list(self.seen)


def token_seen() -> tuple[str | None, str]:
    """The mesh token as an actor, and a subprocess it starts, find it in their environment."""
    import subprocess

    child = subprocess.run(["sh", "-c", 'printf %s "$PROCMESH_TOKEN"'], capture_output=True, text=True, check=True)
    return os.environ.get("PROCMESH_TOKEN"), child.stdout


class CountsCleanups(Actor):
    """Appends its pid to a file each time its __cleanup__ runs."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __cleanup__(self, exc) -> None:
        time.sleep(0.2)  # long enough for a second cleanup to overlap the first, if one came
        with open(self.path, "a") as f:
            f.write(f"{os.getpid()}\n")


class SpawnsOnAll(Actor):
    """Spawns CountsCleanups on the procs it is given; also makes and stops meshes when asked."""

    def __init__(self, procs, path: str) -> None:
        self.procs = procs
        self.counted = procs.spawn("counted", CountsCleanups, path)

    @endpoint
    def ready(self) -> None:
        self.counted.initialized.get(timeout=60)

    @endpoint
    def make_and_stop(self, rounds: int) -> int:
        for i in range(rounds):
            self.procs.spawn(f"brief{i}", Tally).stop().get(timeout=60)
            this_host().spawn_procs(per_host={"gpus": 1}, name=f"briefprocs{i}").stop().get(timeout=60)
        return len(context().actor_instance.children)  # only what it made and has not stopped


class Blobs(Actor):
    """Large replies to small requests."""

    @endpoint
    def blob(self, size: int) -> bytes:
        return b"x" * size

    @endpoint
    def ping(self) -> str:
        return "pong"


class HostAware(Actor):
    """What an actor sees of hosts and ports (tests/integration/local/test_monarch_names.py)."""

    @endpoint
    def own_host(self) -> list:
        from mesh_client import this_proc

        here = this_proc().host_mesh
        return [type(here).__name__, here == this_host()]

    @endpoint
    def host_of(self, mesh) -> bool:
        return mesh.host_mesh == this_host()

    @endpoint
    def table_of(self, mesh) -> str:
        return mesh.to_table()

    @endpoint(explicit_response_port=True)
    def undeliverable(self, port) -> None:
        seen = [port.return_undeliverable]
        port.return_undeliverable = False
        port.send([*seen, port.return_undeliverable])

    @endpoint
    def ping(self) -> int:
        return 1
