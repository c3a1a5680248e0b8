"""A watch of a resource that may not be served to the operator (Kueue's Workloads: its CRD not
installed, or the chart's rbac.kueue off): the 404 or 403 is said once, at info, and the list
is tried again at each pause, not warned of every 30 s for good. Its list is answered by a
stand-in of our own KubeClient's ``list_paged`` (the pauses shortened)."""

import asyncio
import logging

import pytest

from procmesh_operator import kubeclient, listwatch


class Refusing:
    def __init__(self, status: int, times: int) -> None:
        self.status, self.times, self.asked = status, times, 0

    async def list_paged(self, path, label_selector, transform):
        self.asked += 1
        if self.asked <= self.times:
            raise kubeclient.ApiError(self.status, "Forbidden" if self.status == 403 else "NotFound", "no")
        return {"items": [], "metadata": {"resourceVersion": "7"}}

    async def watch(self, path, params):  # a watch that waits until the test stops it
        await asyncio.Event().wait()
        yield {}


@pytest.mark.parametrize("status, why", [(403, "may not list it"), (404, "CRD is not installed")])
def test_a_resource_not_served_is_said_once_and_looked_for_again(status, why, caplog, monkeypatch):
    monkeypatch.setattr(listwatch, "RETRY_FIRST_SECONDS", 0.001)
    monkeypatch.setattr(listwatch, "RETRY_MAX_SECONDS", 0.001)
    client = Refusing(status, times=4)

    async def main():
        watch = listwatch.ListWatch(client, "/apis/kueue.x-k8s.io/v1beta2/workloads", "l", dict,
                                    lambda _t, _b: None, optional=True)
        watch.start()
        while not (watch.lists >= 5 and client.asked >= 5):
            await asyncio.sleep(0.01)
        await watch.stop()

    with caplog.at_level(logging.INFO, logger=listwatch.logger.name):
        asyncio.run(asyncio.wait_for(main(), 30))
    said = [r for r in caplog.records if r.name == listwatch.logger.name]
    assert [r.levelno for r in said] == [logging.INFO, logging.INFO], [r.getMessage() for r in said]
    assert why in said[0].getMessage() and "served again" in said[1].getMessage()
