"""The chart has one source of truth with the rest of the repository.

Aspects:
- its CRD copies are byte-equal to crds/ (scripts/sync-chart-crds writes them);
- the proc server image it passes to the operator is the operator's own default;
- its version, appVersion and the package version agree (appVersion tags both images).
"""

from __future__ import annotations

import pathlib
import re

import pytest
import yaml

from procmesh_operator import settings

ROOT = pathlib.Path(__file__).resolve().parents[3]
CHART = ROOT / "charts" / "procmesh-operator"


@pytest.mark.parametrize("source,copy", [
    ("crds/procmesh.yaml", "files/procmesh.yaml"),
    ("crds/kopf-peering.yaml", "crds/kopf-peering.yaml"),
    ("crds/procmesh-queue-label.yaml", "files/procmesh-queue-label.yaml"),
])
def test_chart_crds_are_copies_of_crds(source: str, copy: str) -> None:
    assert (CHART / copy).read_bytes() == (ROOT / source).read_bytes(), (
        f"{CHART / copy} differs from {source}: run scripts/sync-chart-crds")


def test_default_proc_server_image_matches_the_operator() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    image = values["operator"]["procServerImage"]
    rendered = f"{image['repository']}:{image['tag'] or chart['appVersion']}"
    assert rendered == settings.DEFAULT_IMAGE


def test_versions_agree() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    version = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M)
    assert version is not None
    assert chart["version"] == chart["appVersion"] == version.group(1)
