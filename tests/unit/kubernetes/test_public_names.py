"""The Kubernetes backend's errors are raised under their public path (issue 15, item 10)."""

import pickle
import traceback

from mesh_client import kubernetes


def test_errors_carry_their_public_module():
    for name in ("KubernetesMeshError", "MeshAccessDenied", "MeshNotFound", "MeshNotReady"):
        cls = getattr(kubernetes, name)
        assert f"{cls.__module__}.{cls.__qualname__}" == f"mesh_client.kubernetes.{name}"
    try:
        raise kubernetes.MeshNotReady("ProcMesh ns/m cannot become Ready: x", "X")
    except kubernetes.MeshNotReady as exc:
        text = "".join(traceback.format_exception(exc))
        copy = pickle.loads(pickle.dumps(exc))
    assert "mesh_client.kubernetes.MeshNotReady: ProcMesh ns/m" in text and "_src" not in text.splitlines()[-1]
    assert type(copy) is kubernetes.MeshNotReady
