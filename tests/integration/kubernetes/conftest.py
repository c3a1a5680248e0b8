"""The Kubernetes backend's tests run against the operator on the local control plane."""

from tests.integration.operator.conftest import core, crd, custom, devices_free, gpu_node, operator  # noqa: F401
