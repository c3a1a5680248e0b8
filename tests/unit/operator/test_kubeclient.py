"""How the operator's API client reads answers: JSON bodies, JSON Status errors, and the plain
text a real API server sends for a group version it does not serve (found on a 1.33-emulating
control plane: the operator retried a JSON decoding error forever instead of reporting
DRANotServed)."""

import contextlib

import pytest

from procmesh_operator import kubeclient


def test_a_json_body_is_returned():
    assert kubeclient.decode(200, "OK", '{"items": []}') == {"items": []}
    assert kubeclient.decode(200, "OK", "") is None


def test_a_json_status_error_keeps_reason_and_message():
    with pytest.raises(kubeclient.ApiError) as info:
        kubeclient.decode(409, "Conflict", '{"kind": "Status", "reason": "AlreadyExists", '
                                           '"message": "pods \\"p-0\\" already exists"}')
    assert info.value.conflict and info.value.reason == "AlreadyExists"
    assert info.value.message == 'pods "p-0" already exists'


def test_a_plain_text_404_is_not_found():
    with pytest.raises(kubeclient.ApiError) as info:
        kubeclient.decode(404, "Not Found", "404 page not found\n")
    assert info.value.not_found and info.value.message == "404 page not found"


def test_a_success_that_is_not_json_is_an_error_that_shows_the_body():
    with pytest.raises(kubeclient.ApiError, match="not JSON: '<html>"):
        kubeclient.decode(200, "OK", "<html>proxy login</html>")


class PagedServer(kubeclient.KubeClient):
    """The client's paging over a fake of its own request method (no HTTP): 5 items, served
    in pages of the requested limit, every page of one snapshot resourceVersion."""

    def __init__(self):
        super().__init__(None)
        self.requests = []

    async def request(self, method, path, *, params=None, body=None,
                      content_type="application/json"):
        self.requests.append(dict(params or {}))
        start = int((params or {}).get("continue") or 0)
        end = start + int(params["limit"])
        items = [{"metadata": {"name": f"p{i}"}} for i in range(start, min(end, 5))]
        return {"metadata": {"resourceVersion": "42", "continue": str(end) if end < 5 else ""},
                "items": items}


def test_list_paged_follows_continue_and_transforms_each_item():
    import asyncio

    client = PagedServer()
    listed = asyncio.run(client.list_paged("/api/v1/pods", label_selector="a", page_size=2,
                                           transform=lambda i: {"name": i["metadata"]["name"]}))
    assert listed == {"metadata": {"resourceVersion": "42"},
                      "items": [{"name": f"p{i}"} for i in range(5)]}
    assert [r.get("continue") for r in client.requests] == [None, "2", "4"]
    assert all(r["labelSelector"] == "a" and r["limit"] == "2" for r in client.requests)


@contextlib.asynccontextmanager
async def local_api(handler, route="/{tail:.*}"):
    """Our API client against a local HTTP server (a real socket, no API server) that answers
    every GET under ``route`` with ``handler``."""
    from aiohttp import web
    from kubernetes import client as k8s

    app = web.Application()
    app.router.add_get(route, handler)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    config = k8s.Configuration()
    config.host = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"
    api = kubeclient.KubeClient(config)
    try:
        yield api
    finally:
        await api.close()
        await runner.cleanup()


def test_watch_decodes_lines_split_across_chunks_from_a_real_socket():
    """A watch's JSON lines arrive in chunks that cut them anywhere; each event is decoded
    whole, in order, from a local HTTP server (a real socket, no API server)."""
    import asyncio
    import json

    from aiohttp import web

    events = [{"type": "ADDED", "object": {"metadata": {"name": f"p{i}", "pad": "x" * 3000}}}
              for i in range(5)]
    stream = b"".join(json.dumps(e).encode() + b"\n" for e in events)
    seen_params = []

    async def handler(request):
        seen_params.append(dict(request.query))
        response = web.StreamResponse()
        await response.prepare(request)
        for start in range(0, len(stream), 777):  # cuts through lines and JSON alike
            await response.write(stream[start:start + 777])
            await asyncio.sleep(0)
        return response

    async def main():
        async with local_api(handler, "/api/v1/pods") as api:
            return [e async for e in api.watch("/api/v1/pods", {"resourceVersion": "7"})]

    assert asyncio.run(main()) == events
    assert seen_params == [{"resourceVersion": "7", "watch": "1"}]


def test_a_request_without_an_answer_is_unanswered_not_a_transport_error(monkeypatch):
    """A server that accepts and never answers, then none listening: the reconcile reports
    kubeclient.Unanswered in the mesh's Degraded condition (aiohttp's own errors escaped it, so
    the mesh showed nothing while the operator retried)."""
    import asyncio
    import socket

    from kubernetes import client as k8s

    monkeypatch.setattr(kubeclient, "REQUEST_TIMEOUT_SECONDS", 0.5)
    silent = socket.create_server(("127.0.0.1", 0))  # the kernel accepts; nobody answers

    async def ask(port):
        config = k8s.Configuration()
        config.host = f"http://127.0.0.1:{port}"
        api = kubeclient.KubeClient(config)
        try:
            await api.request("GET", "/api/v1/namespaces/ns/pods/p-0")
        finally:
            await api.close()

    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))  # held, never listening: refused, and no one else's meanwhile
    try:
        with pytest.raises(kubeclient.Unanswered,
                           match=r"GET /api/v1/namespaces/ns/pods/p-0: the API server did not answer within 0.5 s"):
            asyncio.run(ask(silent.getsockname()[1]))
        with pytest.raises(kubeclient.Unanswered, match=r"GET /api/v1/namespaces/ns/pods/p-0: ClientConnectorError"):
            asyncio.run(ask(closed.getsockname()[1]))
    finally:
        silent.close()
        closed.close()


def test_requests_are_answered_beside_more_watches_than_requests_may_hold():
    """Every watch holds a connection for minutes (three per watched namespace: pods, Services,
    Roles); a request must still find one. With a fixed pool (64 requests + 8 watches), 72
    open watches left none, and the request failed at the connect timeout. Here 100 watches
    stay open on a local server (a real socket) while a GET is answered."""
    import asyncio

    from aiohttp import web

    watches = 100

    async def main():
        started = asyncio.Event()
        held = []

        async def handler(request):
            if request.query.get("watch"):
                response = web.StreamResponse()
                await response.prepare(request)
                held.append(response)
                if len(held) == watches:
                    started.set()
                await asyncio.sleep(3600)  # a quiet watch, ended by the cleanup
                return response
            return web.json_response({"metadata": {"name": "y"}})

        async with local_api(handler) as api:

            async def watch(i):
                async for _ in api.watch(f"/api/v1/namespaces/ns{i}/pods", {}):
                    pass

            tasks = [asyncio.create_task(watch(i)) for i in range(watches)]
            try:
                await asyncio.wait_for(started.wait(), 60)
                return await asyncio.wait_for(api.get("/api/v1/namespaces/x/services/y"), 60)
            finally:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)

    assert asyncio.run(main()) == {"metadata": {"name": "y"}}
