"""What the README shows a kubectl user is what kubectl prints (issue 15 item 10).

Aspects: ``kubectl get pm`` of the example cpu-mesh has the README's header and row (READY and
DESIRED as two numbers, not ``8/8``, which is ``procmesh get``'s form); ``kubectl scale`` is
refused as the README says.
"""

import pathlib

import pytest
import yaml

from tests.integration.operator import support

pytestmark = pytest.mark.cluster

ROOT = pathlib.Path(__file__).resolve().parents[3]


def readme_block(command: str) -> list[list[str]]:
    """The README's output lines after ``$ <command>``, up to the next prompt, split in words."""
    lines = (ROOT / "README.md").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"$ {command}"))
    out = []
    for line in lines[start + 1:]:
        if line.startswith(("$", "```")):
            break
        out.append(line.split())
    return out


def test_kubectl_get_prints_what_the_readme_shows(cluster, operator, custom, namespace):
    body = yaml.safe_load((ROOT / "examples" / "meshes" / "cpu-mesh.yaml").read_text())
    support.create_mesh(custom, namespace, "cpu-mesh", **body["spec"])
    support.wait_ready(custom, namespace, "cpu-mesh")
    header, *rows = support.kubectl(cluster, "get", "pm", "-n", namespace).stdout.splitlines()
    shown_header, *shown_rows = readme_block("kubectl get pm")
    assert header.split() == shown_header
    row = next(r.split() for r in rows if r.split()[0] == "cpu-mesh")
    shown = next(r for r in shown_rows if r[0] == "cpu-mesh")
    assert row[:-1] == shown[:-1]  # all but AGE


def test_kubectl_scale_is_refused_as_the_readme_says(cluster, operator, custom, namespace):
    support.create_mesh(custom, namespace, "fixed", perHost=[{"name": "procs", "size": 1}])
    done = support.kubectl(cluster, "scale", "pm/fixed", "--replicas=2", "-n", namespace,
                           check=False)
    assert done.returncode != 0
    # No /scale subresource: the API server answers NotFound for an existing mesh.
    assert 'Error from server (NotFound): procmeshes.procmesh.io "fixed" not found' in done.stderr
    assert 'Error from server (NotFound): procmeshes.procmesh.io "x" not found' in \
        (ROOT / "README.md").read_text()
