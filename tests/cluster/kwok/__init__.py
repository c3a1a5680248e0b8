"""KWOK in the test cluster: thousands of simulated nodes and pods for the scale runs.

Test tooling, not product. :mod:`.build` builds the ``kwok`` controller (``sigs.k8s.io/kwok``,
pinned in ``gomod/``) into a cache folder of its own, keyed apart from the control-plane binaries
so that neither pin rebuilds the other; :mod:`.simulator` runs it against a cluster of
:mod:`tests.cluster.controlplane` and creates the fake nodes it manages. KWOK plays each pod's
lifecycle from the Stage objects KWOK v0.8.0 ships (``kustomize/stage/fast``): nodes become
Ready, pods bound to them Running and Ready, deleted pods go; no process runs anywhere.
"""
