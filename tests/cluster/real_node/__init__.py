"""The real node of the test cluster: kubelet, kube-proxy, containerd, runc and CNI, in a netns.

Beside the process node (:mod:`tests.cluster.process_node`), a cluster can run a node made of the
software a Kubernetes cluster uses. The whole cluster (control plane included) then runs inside
one network namespace made by the harness (:mod:`.netns`), and a relay (:mod:`.relay`) makes its
ports reachable on 127.0.0.1 of the host. :mod:`.cluster` starts and stops it, :mod:`.node` runs
one node's daemons, :mod:`.configs` renders their configuration, :mod:`.cgroups` and
:mod:`.mounts` clean up after them, :mod:`.images` builds our images with buildah and imports
them. See tests/cluster/README.md ("The real node") for every setting and why.
"""
