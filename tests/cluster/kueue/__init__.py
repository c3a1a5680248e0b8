"""Kueue's real controller manager beside the test cluster (test tooling, not product).

:mod:`.builds` builds the pinned ``sigs.k8s.io/kueue`` (``gomod/``) into a cache of its own,
from ``scripts/setup`` or when a test first asks for Kueue; :mod:`.configs` renders its
Configuration file and the queues tests use; :mod:`.manager` installs its CRDs and runs it as a process against a
:class:`tests.cluster.controlplane.Cluster`, as the kube-scheduler runs. The ``kueue`` fixture of
:mod:`tests.cluster.pytest_plugin` starts it once per session.
"""
