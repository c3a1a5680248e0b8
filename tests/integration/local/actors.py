"""Actor classes shared by the local integration tests (importable by the proc servers)."""

import asyncio
import os
import sys
import time

from mesh_client import Actor, context, current_rank, current_size, endpoint


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
    async def add_later(self, a: int, b: int) -> int:
        await asyncio.sleep(0.01)
        return a + b

    @endpoint
    def sleep(self, seconds: float) -> float:
        time.sleep(seconds)
        return seconds

    @endpoint
    def fail(self, message: str) -> None:
        raise KeyError(message)

    def not_an_endpoint(self) -> None:
        pass


class Caller(Actor):
    """Calls another actor mesh that it was handed, from its own proc."""

    @endpoint
    def relay(self, other, value):
        return {"from_pid": os.getpid(), "answers": list(other.echo.call(value).get().values())}

    @endpoint
    async def relay_async(self, other, value):
        return await other.slice(hosts=0, gpus=0).echo.call_one(value)


class FailingInit(Actor):
    def __init__(self) -> None:
        raise RuntimeError("cannot build the model")


class Unpicklable(Exception):
    def __reduce__(self):
        raise TypeError("not picklable")


class RaisesUnpicklable(Actor):
    @endpoint
    def go(self) -> None:
        raise Unpicklable("secret state")
