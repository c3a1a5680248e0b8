"""The async forms of attach and spawn_procs, and the progress line's end, against the real
control plane and operator.

Aspects: ``attach_async`` and ``KubernetesHostMesh.spawn_procs_async`` are awaited while another
task of the loop keeps running, and give working meshes; cancelling a ``spawn_procs_async``
whose mesh cannot be placed ends its wait and deletes the ProcMesh; an awaited ``stop()`` of a
mesh the client created (and a host mesh's ``shutdown()``) lets another task run while its
delete waits on the API server, and raises the delete's error in the awaiting caller; the
progress line that
``attach`` (and ``attach_async``) draws on stderr ends with a newline before the traceback of a
Ctrl-C (SIGINT) and of a timeout, so the traceback starts on a line of its own.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys

import pytest

from mesh_client._src.kubernetes.api import make_api_client
from mesh_client.kubernetes import ApiServerUnreachable, KubernetesHostMesh, attach_async
from tests.cluster import testing
from tests.integration.cli.support import env
from tests.integration.kubernetes.relay import Relay, through
from tests.integration.local.actors import Recorder
from tests.integration.local.test_async_forms import with_turns
from tests.integration.operator.support import ROOT, create_mesh, mesh_gone

pytestmark = pytest.mark.cluster

NOWHERE = {"nodeSelector": {"procmesh.io/test-no-such-node": "true"}}  # never schedulable


def test_attach_and_spawn_procs_async_let_other_tasks_run(kube, custom, namespace, operator):
    create_mesh(custom, namespace, "later", hosts=1, perHost=[{"name": "gpus", "size": 2}])
    hosts = KubernetesHostMesh(hosts=1, namespace=namespace, api_client=kube, timeout=120)

    async def main():
        mesh, turns = await with_turns(attach_async("later", namespace, api_client=kube, timeout=120))
        assert turns >= 1 and mesh.sizes == {"hosts": 1, "gpus": 2}
        assert list((await mesh.spawn("rec", Recorder).echo.call(1)).values()) == [1, 1]
        await mesh.stop()
        made, turns = await with_turns(hosts.spawn_procs_async(per_host={"gpus": 1}, name="made-async"))
        assert turns >= 1
        assert await made.spawn("rec", Recorder).echo.call_one(2) == 2
        await made.stop()

    asyncio.run(main())
    testing.wait_for(lambda: mesh_gone(custom, namespace, "made-async"), "stop() deleting the mesh it created")


def test_cancelling_spawn_procs_async_deletes_its_mesh(kube, custom, namespace, operator):
    hosts = KubernetesHostMesh(hosts=1, namespace=namespace, api_client=kube, timeout=600, template=NOWHERE)

    async def main():
        task = asyncio.ensure_future(hosts.spawn_procs_async(per_host={"gpus": 1}, name="cancelled"))
        for _ in range(600):  # bounded: until the mesh exists (and so is being waited for)
            if not mesh_gone(custom, namespace, "cancelled") or task.done():
                break
            await asyncio.sleep(0.05)
        assert not task.done()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    testing.wait_for(lambda: mesh_gone(custom, namespace, "cancelled"), "the cancelled spawn deleting its mesh")


@pytest.mark.parametrize("end", ["procs", "hosts"])
def test_an_awaited_stop_lets_other_tasks_run_while_it_deletes_and_raises_its_error_there(
        cluster, namespace, operator, tmp_path, monkeypatch, end):
    """The client reaches the API server through a relay, which then holds what it is sent (an
    API server that does not answer): the awaited ``procs.stop()`` (``hosts.shutdown()``) waits
    for its delete, a task of the same loop runs meanwhile and closes the relay, and the delete's
    error is raised in the awaiting caller. The stop held the loop until its request timed out,
    the task after it."""
    monkeypatch.setenv("PROCMESH_API_TIMEOUT", "30")
    relay = Relay(("127.0.0.1", cluster.ports.apiserver))
    api_client = make_api_client(str(through(relay, cluster, tmp_path)))
    seen: dict[str, bool] = {}

    async def closer() -> None:
        seen["closed_while_stopping"] = "stopped" not in seen
        relay.close()

    async def main() -> None:
        hosts = KubernetesHostMesh(hosts=1, namespace=namespace, api_client=api_client, timeout=120)
        procs = await hosts.spawn_procs_async(per_host={"gpus": 1}, name=f"held-{end}")
        relay.holding.set()
        task = asyncio.create_task(closer())
        with pytest.raises(ApiServerUnreachable):
            await (procs.stop() if end == "procs" else hosts.shutdown())
        seen["stopped"] = True
        await task

    try:
        asyncio.run(main())
    finally:
        relay.close()
        api_client.close()
    assert seen == {"closed_while_stopping": True, "stopped": True}


ATTACH = """
from mesh_client.kubernetes import attach
attach("pending", {namespace!r}, kubeconfig={kubeconfig!r}, timeout={timeout}, progress=True)
"""

ATTACH_ASYNC = """
import asyncio
from mesh_client.kubernetes import attach_async
asyncio.run(attach_async("pending", {namespace!r}, kubeconfig={kubeconfig!r}, timeout={timeout}, progress=True))
"""


def read(path) -> str:
    return path.read_bytes().decode()  # read_text() would turn the progress line's "\r" into "\n"


@pytest.mark.parametrize("how", ["sigint", "timeout", "sigint-async"])
def test_the_progress_line_ends_before_a_traceback(cluster, custom, namespace, operator, tmp_path, how):
    create_mesh(custom, namespace, "pending", hosts=1, perHost=[{"name": "gpus", "size": 1}], template=NOWHERE)
    code = (ATTACH_ASYNC if how.endswith("async") else ATTACH).format(
        namespace=namespace, kubeconfig=str(cluster.kubeconfig), timeout=3 if how == "timeout" else 600)
    err = tmp_path / "stderr"
    with err.open("w") as sink:
        # SIGINT as a terminal's program has it, whatever the runner of these tests inherited
        # (a job started in the background by a script has it ignored)
        proc = subprocess.Popen([sys.executable, "-c", code], stderr=sink, env=env(), cwd=str(ROOT),
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        try:
            if how.startswith("sigint"):
                testing.wait_for(lambda: f"\rProcMesh {namespace}/pending:" in read(err) or proc.poll() is not None,
                                 "the progress line")
                assert proc.poll() is None, read(err)
                proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                pytest.fail(f"attach went on after {how}; its stderr ends: {read(err)[-2000:]!r}")
        finally:
            proc.kill()
    text = read(err)
    assert ("KeyboardInterrupt" if how.startswith("sigint") else "MeshNotReady: ProcMesh") in text, text
    before, _, _ = text.partition("Traceback (most recent call last):")
    assert f"\rProcMesh {namespace}/pending:" in before and before.endswith("\n"), repr(text[:400])
