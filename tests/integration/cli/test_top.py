"""``procmesh top``, ``describe`` and ``get`` with the rights of the access model (README,
"Access"): a user bound to the mesh's Role alone asks every proc over the authenticated wire;
one without it is told which Role to bind.

Aspects: top's rows come from the procs themselves (the actor count an attached client made),
and a top where no proc answered fails; one whose procs refuse the token of their Secret (changed
under them) says which Secret and what to do;
a top of a mesh with no procs (suspended) fails and gives its phase, as logs does;
describe works without pod or event rights and says so (READY from the status, STATE unknown, never
Missing); every refusal names the mesh's Role.
"""

from __future__ import annotations

import pytest

from mesh_client.kubernetes import attach
from tests.cluster import testing
from tests.integration.cli.support import procmesh, token_kubeconfig
from tests.integration.kubernetes.test_access import bind_mesh_role
from tests.integration.local.actors import Recorder
from tests.integration.operator.support import create_mesh, get_mesh, token_secret, wait_ready

pytestmark = pytest.mark.cluster

#: Rights unrelated to meshes (a Role needs one rule): what a user without the mesh's Role has.
NOTHING = [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]


def test_top_and_describe_with_the_mesh_role_only(cluster, kube, custom, namespace, operator, tmp_path):
    create_mesh(custom, namespace, "watched", hosts=1, perHost=[{"name": "procs", "size": 3}])
    wait_ready(custom, namespace, "watched")
    mesh = attach("watched", namespace, api_client=kube, timeout=120, progress=False)
    mesh.spawn("rec", Recorder).echo.call(1).get()  # one actor per proc, as the procs will say
    try:
        with testing.service_account_client(cluster, kube, namespace, "alice", NOTHING) as alice:
            bind_mesh_role(kube, alice, namespace, "watched", "alice")
            kc = token_kubeconfig(tmp_path / "alice.kubeconfig", alice, namespace)
            top = procmesh(kc, "top", "watched")
            assert top.returncode == 0, top.stderr
            header, *rows = top.stdout.splitlines()
            assert header.split() == ["RANK", "POD", "GPU", "ALLOCATED", "RESERVED", "CAP", "RESERVED/CAP",
                                      "ACTORS"]
            assert [r.split()[:2] for r in rows] == [[str(i), f"watched-{i}"] for i in range(3)]
            # CPU procs: no allocator to report; the actor count is the procs' own answer
            assert all(r.split()[-5:] == ["no", "CUDA", "in", "use", "1"] for r in rows), top.stdout
            # Without pods/portforward no proc answers through the API server: each row says
            # why, and the command fails (a table of failures is no answer).
            forwarded = procmesh(kc, "top", "watched", "--via-api-server")
            assert forwarded.returncode == 1, forwarded.stdout
            assert f"no proc of ProcMesh {namespace}/watched answered" in forwarded.stderr
            assert forwarded.stdout.count("MeshAccessDenied") == 3, forwarded.stdout

            described = procmesh(kc, "describe", "watched")
            assert described.returncode == 0, described.stderr
            assert "pods not readable by this client" in described.stdout
            assert described.stdout.endswith("Events:\n  (events not readable by this client: 'list' on "
                                              "events in its namespace shows them)\n"), described.stdout
            assert "Phase:          Ready" in described.stdout
            procs = described.stdout.split("Procs:\n")[1].split("Events:")[0].splitlines()
            # READY from the status, STATE and RESTARTS unknown: no healthy proc shown Missing
            assert [line.split()[6:9] for line in procs[2:]] == [["true", "-", "-"]] * 3, described.stdout

            listed = procmesh(kc, "get")
            assert listed.returncode == 1 and "refused to list procmeshes" in listed.stderr
            assert "'procmesh get MESH'" in listed.stderr
            assert procmesh(kc, "get", "watched").stdout.split()[6:9] == ["watched", "3/3", "Ready"]
    finally:
        mesh.stop().get()


def test_without_the_mesh_role_every_command_names_it(cluster, kube, custom, namespace, operator, tmp_path):
    create_mesh(custom, namespace, "guarded", hosts=1, perHost=[{"name": "procs", "size": 1}])
    wait_ready(custom, namespace, "guarded")
    with testing.service_account_client(cluster, kube, namespace, "bob", NOTHING) as bob:
        kc = token_kubeconfig(tmp_path / "bob.kubeconfig", bob, namespace)
        for command in ("top", "describe", "get", "wait"):
            result = procmesh(kc, command, "guarded", "--timeout", "5s") if command in ("top", "wait") \
                else procmesh(kc, command, "guarded")
            assert result.returncode == 1, (command, result.stdout)
            assert "--role=guarded-procmesh-access" in result.stderr, (command, result.stderr)


def test_top_names_a_token_secret_changed_under_the_procs(cluster, core, custom, namespace, operator):
    create_mesh(custom, namespace, "rewritten", hosts=1, perHost=[{"name": "procs", "size": 2}])
    wait_ready(custom, namespace, "rewritten")
    secret = token_secret(core, namespace, "rewritten")
    core.patch_namespaced_secret(secret, namespace, {"stringData": {"token": "2" * 64}})
    result = procmesh(cluster.kubeconfig, "top", "rewritten", "-n", namespace)
    assert result.returncode == 1
    assert f"proc rank 0 (pod rewritten-0) refused the token in Secret {namespace}/{secret}" in result.stderr
    assert "suspend the mesh and resume it" in result.stderr


def test_top_of_a_suspended_mesh_says_it_has_no_procs(cluster, custom, namespace, operator):
    create_mesh(custom, namespace, "dormant", hosts=1, perHost=[{"name": "procs", "size": 2}], suspend=True)
    testing.wait_for(lambda: (get_mesh(custom, namespace, "dormant").get("status") or {}).get("phase") == "Suspended",
                     "the mesh suspended")
    result = procmesh(cluster.kubeconfig, "top", "dormant", "-n", namespace)
    assert (result.returncode, result.stdout) == (1, ""), result.stdout  # was 'No procs.', status 0
    assert result.stderr == (f"error: ProcMesh {namespace}/dormant has no proc pods to ask for their GPU memory "
                             f"(phase Suspended); 'procmesh describe dormant -n {namespace}' says why\n")
