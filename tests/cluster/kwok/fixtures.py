"""The ``kwok_cluster`` pytest fixture: a control plane of its own with KWOK and fake nodes.

Its own cluster, not the session's ``cluster``: fake nodes with room for hundreds of pods would
change what the other tests see (node lists, gang fits, node loss). No process node runs in it.
KWOK is built on demand (:mod:`.build`, a few minutes cold); missing control-plane binaries skip
the tests, or fail them under ``CI``, as for ``cluster``.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest

from tests.cluster import binaries, controlplane
from tests.cluster.kwok import build, simulator

#: The fake nodes of ``kwok_cluster``, and how many pods each takes.
NODES = tuple(f"kwok-node-{i}" for i in range(4))
PODS_PER_NODE = 200


@pytest.fixture(scope="module")
def kwok_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[controlplane.Cluster]:
    """A running control plane, KWOK, and :data:`NODES` Ready; all stopped at the end."""
    absent = binaries.missing(binaries.CONTROL_PLANE)
    if absent or (build.missing() and shutil.which("go") is None):
        message = (f"cluster binaries missing ({', '.join(absent)}): run `bash tests/cluster/build.sh`"
                   if absent else "kwok is not built and Go is missing: install Go, or set "
                   "$PROCMESH_KWOK_DIR to a folder with kwok and stages.yaml")
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    instance = controlplane.Cluster(tmp_path_factory.mktemp("kwok-cluster"))
    instance.up([])
    try:
        simulator.start(instance)
        simulator.add_nodes(instance, NODES, pods=PODS_PER_NODE)
        yield instance
    finally:
        instance.down()
