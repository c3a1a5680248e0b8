"""``async with`` on a host mesh the program owns (``KubernetesHostMesh``, the mesh of
``attach_to_workers``), as on Monarch's ``HostMesh``: entering one that was shut down raises its
RuntimeError; leaving shuts it down unless that was done already (so nested blocks shut down
once), and waits for that shutdown. One step, not a check then a shutdown: two exits racing
(two tasks, two threads) shut down once, neither raising "already shut down", and neither goes
on while the procs still end. No ``with``: Monarch's host mesh has none. Mixed into
:mod:`..kubernetes.host_mesh` and :mod:`..local.workers`."""

from __future__ import annotations

from typing import TypeVar

from mesh_client._src.runtime.futures import Future

H = TypeVar("H", bound="OwnedHostMesh")


class OwnedHostMesh:
    """The context-manager half of an owned host mesh; the host mesh gives the rest."""

    def shutdown(self) -> Future[None]:
        raise NotImplementedError

    def _shutdown_once(self) -> Future[None]:
        """:meth:`shutdown`, or, once shut down, the future of that shutdown (in one step)."""
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
        await self._shutdown_once()  # it stops what the host mesh spawned off the event loop
