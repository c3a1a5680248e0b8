"""ProcMesh resources as proc meshes: ``attach`` to one, or create them from a host mesh.

    from mesh_client.kubernetes import KubernetesHostMesh, attach

    trainer = attach("trainer", namespace="rl")                 # an existing ProcMesh
    trainer = await attach_async("trainer", namespace="rl")     # the same, in an async controller
    hosts = KubernetesHostMesh(hosts=1, namespace="rl")
    policy = hosts.spawn_procs(per_host={"gpus": 2}, gpus=[0, 1], memory_fraction=0.3)
"""

from mesh_client._src.kubernetes.attaching import attach, attach_async
from mesh_client._src.kubernetes.errors import (
    ApiServerUnreachable,
    KubernetesMeshError,
    MeshAccessDenied,
    MeshNotFound,
    MeshNotReady,
)
from mesh_client._src.kubernetes.host_mesh import KubernetesHostMesh

# Tracebacks and reprs name the errors where users import them, not where they are defined.
for _error in (ApiServerUnreachable, KubernetesMeshError, MeshAccessDenied, MeshNotFound, MeshNotReady):
    _error.__module__ = __name__
del _error

__all__ = ["ApiServerUnreachable", "KubernetesHostMesh", "KubernetesMeshError", "MeshAccessDenied", "MeshNotFound", "MeshNotReady", "attach",
           "attach_async"]
