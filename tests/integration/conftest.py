"""Integration-test fixtures: the local Kubernetes cluster of tests/cluster (see its README)."""

from tests.cluster.pytest_plugin import (  # noqa: F401 - fixtures and hooks are found by name
    cluster,
    kube,
    namespace,
    pytest_runtest_call,
    pytest_runtest_makereport,
)
