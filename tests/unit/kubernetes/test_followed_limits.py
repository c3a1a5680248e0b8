"""A client follows the mesh's restart limit, not only its count (attaching.KubernetesProcs):
a user who raises spec.maxRestarts after RestartLimitReached, as its message says to, sees the
new limit in the next restart's message and in a respawned SPMD actor's TORCHELASTIC_MAX_RESTARTS.
The API is stubbed at our own wrapper (KubeApi's ``get_mesh``)."""

from mesh_client._src.kubernetes import attaching


def mesh(max_restarts: int, restarts: int) -> dict:
    return {"metadata": {"name": "m", "uid": "0123456789"},
            "spec": {"restartPolicy": "RestartProc", "maxRestarts": max_restarts},
            "status": {"restarts": restarts}}


class MeshApi:
    namespace = "ns"

    def __init__(self, body: dict) -> None:
        self.body = body

    def get_mesh(self, name: str) -> dict:
        return self.body


def test_a_raised_limit_is_what_the_next_restart_says_and_spmd_sees():
    api = MeshApi(mesh(3, 3))
    procs = attaching.KubernetesProcs(api, mesh(3, 3), ["m-0", "m-1"], created=False)
    assert procs.elastic_info() == ("m-01234567", 3, 3)
    api.body = mesh(10, 4)  # kubectl patch ... maxRestarts: 10, then the operator restarted proc 1
    said = procs._restarted(1)
    assert "4 of at most 10" in said, said
    assert procs.elastic_info() == ("m-01234567", 4, 10)
