"""Which image references a real node's slot drops after an import (node.stale_references):
those naming a replaced image, whatever their name, and nothing that names a current one. Rows
as `ctr images ls` prints them (reference, type, digest, size, platforms, labels)."""

from __future__ import annotations

from tests.cluster.real_node.node import stale_references

MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"


def row(ref: str, digest: str) -> list[str]:
    return [ref, MANIFEST, digest, "193.1", "MiB", "linux/amd64", "io.cri-containerd.image=managed"]


def test_the_id_names_of_replaced_images_go_and_the_current_ones_stay():
    rows = [
        row("docker.io/procmesh/proc-server:0.1.0", "sha256:new"),  # moved to the rebuilt image
        row("sha256:config-new", "sha256:new"),  # the CRI's ID name of the current one
        row("sha256:config-old", "sha256:old"),  # ... and of the one the import replaced
        row("localhost/procmesh/pause:latest", "sha256:pause"),
        row("sha256:config-pause", "sha256:pause"),
        row("docker.io/procmesh/examples:0.1.0-rc", "sha256:other"),  # no longer built
    ]
    current = {"docker.io/procmesh/proc-server:0.1.0", "localhost/procmesh/pause:latest"}
    assert stale_references(rows, current) == ["sha256:config-old",
                                                "docker.io/procmesh/examples:0.1.0-rc"]
    assert stale_references(rows[:2] + rows[3:5], current) == []
