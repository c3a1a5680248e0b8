"""``async with`` on a host mesh the program owns (``KubernetesHostMesh``, the mesh of
``attach_to_workers``), as on Monarch's ``HostMesh``: entering one that was shut down raises its
RuntimeError; leaving shuts it down unless that was done already (so nested blocks shut down
once). No ``with``: Monarch's host mesh has none. Mixed into :mod:`..kubernetes.host_mesh` and
:mod:`..local.workers`."""

from __future__ import annotations

from typing import TypeVar

from mesh_client._src.runtime import offloading
from mesh_client._src.runtime.futures import Future

H = TypeVar("H", bound="OwnedHostMesh")


class OwnedHostMesh:
    """The context-manager half of an owned host mesh; the host mesh gives the rest."""

    def shutdown(self) -> Future[None]:
        raise NotImplementedError

    def _is_shut_down(self) -> bool:
        raise NotImplementedError

    def _shut_down_error(self) -> RuntimeError:
        raise NotImplementedError

    async def __aenter__(self: H) -> H:
        if self._is_shut_down():
            raise self._shut_down_error()
        return self

    async def __aexit__(self, *exc: object) -> None:
        if not self._is_shut_down():
            # shutdown() stops what the host mesh spawned before it returns: off the event loop.
            await offloading.run_blocking(lambda: self.shutdown().get(), name="procmesh-host-shutdown", at_exit=True)
