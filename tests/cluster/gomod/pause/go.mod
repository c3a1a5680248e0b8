// The sandbox ("pause") program of the real node's pods (tests/cluster/build.py); no dependencies.
module procmesh.test/cluster/pause

go 1.26.0
