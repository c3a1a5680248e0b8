"""Integration-test fixtures: the local Kubernetes cluster of tests/cluster (see its README), and
the operator's fixtures, defined once so that every test shares one cluster, one CRD, one GPU
node and one operator."""

from tests.cluster.pytest_plugin import (  # noqa: F401 - fixtures and hooks are found by name
    cluster,
    kube,
    kueue,
    namespace,
    pytest_runtest_call,
    pytest_runtest_makereport,
)
from tests.integration.faults import _no_fault_ends_the_session, faults  # noqa: F401
from tests.integration.operator.fixtures import (  # noqa: F401
    core,
    crd,
    custom,
    devices_free,
    dra_node,
    gpu_node,
    operator,
)
