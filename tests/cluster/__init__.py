"""A real Kubernetes control plane for procmesh's integration tests, on one machine.

Test tooling, not product. :mod:`tests.cluster.binaries` finds (and :mod:`tests.cluster.build`
builds) etcd, kube-apiserver, kube-scheduler, kube-controller-manager and helm from the Go
modules pinned under ``gomod/``; :mod:`tests.cluster.controlplane` runs them on loopback;
:mod:`tests.cluster.process_node` is the kubelet stand-in that runs pods as local processes.
``python -m tests.cluster up|down|status`` drives it from a shell, and the ``cluster`` fixture in
``tests/integration/conftest.py`` from pytest.
"""
