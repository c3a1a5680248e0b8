"""status.procs[].gpu comes from the operator's own decision, never from the proc.

Aspects: pinned mode reports the device of the placement annotation; no-GPU mode (void) and
plugin mode (the device plugin's choice is not in the pod) report none.
"""

from procmesh_operator import assigned_gpus, rendering

from .builders import mesh, pod


def test_pinned_reports_the_placed_device():
    m = mesh(gpus={"mode": "pinned", "deviceIDs": [3, 1]})
    p = pod(m, 1, placement=rendering.ProcPlacement(node="n1", device="1"))
    assert assigned_gpus.assigned_gpu(p) == "1"


def test_no_gpus_and_plugin_report_none():
    assert assigned_gpus.assigned_gpu(pod(mesh(), 0)) is None
    assert assigned_gpus.assigned_gpu(pod(mesh(gpus={"mode": "plugin"}), 0)) is None
