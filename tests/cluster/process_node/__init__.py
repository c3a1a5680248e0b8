"""The process node: a kubelet for tests that runs each bound pod as local processes.

``python -m tests.cluster.process_node <node folder>`` runs one node's agent
(:mod:`.agent`), started by :mod:`tests.cluster.controlplane`. Modules, one job each:
:mod:`.config` (settings), :mod:`.api` (REST calls as the node), :mod:`.registration` (Node object
and Lease heartbeat), :mod:`.addresses` (pod IPs), :mod:`.gpus` (device plugin and NVIDIA runtime
emulation), :mod:`.support` (fields we cannot honour), :mod:`.environment` (container env),
:mod:`.volumes` (volume contents), :mod:`.sandbox` (the exec shim: private mount namespace),
:mod:`.probes`, :mod:`.containers` (one container's processes and restarts), :mod:`.status`
(pod status as a pure function) and :mod:`.pods` (one pod's lifecycle).
"""
