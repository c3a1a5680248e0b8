"""Remote tracebacks from pods name the controller's file, line and source line (issue 15,
item 7), against the real control plane and operator.

Aspects: a controller script attaches to a ProcMesh, spawns an actor class defined in the script
(pickled by value: the pods have no such file), deletes the script, and the error of an endpoint
that raises in a pod shows ``File "<script>", line N, in go`` with the source line.
"""

import subprocess
import sys
import textwrap

import pytest

from tests.integration.cli.support import env
from tests.integration.operator.support import ROOT, create_mesh

pytestmark = pytest.mark.cluster

SCRIPT = textwrap.dedent('''
    import os
    from mesh_client import Actor, endpoint
    from mesh_client.kubernetes import attach


    class Boom(Actor):
        @endpoint
        def go(self, x):
            raise ValueError(f"boom {x} in a pod")


    mesh = attach("tb", {namespace!r}, kubeconfig={kubeconfig!r}, timeout=120, forward_output=False)
    boom = mesh.spawn("boom", Boom)
    os.remove(__file__)
    try:
        boom.go.call_one(5).get()
    except Exception as exc:
        print(str(exc))
    mesh.stop().get()
''')


def test_a_script_actors_traceback_from_a_pod_shows_its_file_and_lines(cluster, custom, namespace, operator, tmp_path):
    create_mesh(custom, namespace, "tb", hosts=1, perHost=[{"name": "gpus", "size": 1}])
    script = tmp_path / "pod_controller.py"
    script.write_text(SCRIPT.replace("{namespace!r}", repr(namespace)).replace("{kubeconfig!r}", repr(str(cluster.kubeconfig))))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=180,
                          env=env(), cwd=str(ROOT))
    assert done.returncode == 0, done.stderr
    assert f'File "{script}", line 10, in go\n    raise ValueError(f"boom {{x}} in a pod")' in done.stdout, done.stdout
    assert "ValueError: boom 5 in a pod" in done.stdout
