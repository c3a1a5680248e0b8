"""procmesh_operator: the kopf operator that turns ProcMesh resources into pods.

Layout (each module one concern, imported as a module):

* ``mesh_client._src.contract`` (the only part of mesh_client the operator imports) -- what the
  client must agree on: API coordinates, child names, labels, annotations, port, conditions and
  their fatal reasons, the PROCMESH_* env, rank arithmetic.
* :mod:`.names` -- the operator's own names: the token mount, children's labels, node-loss taints.
* :mod:`.specs` and :mod:`.dimensions` -- the parsed spec with its defaults, and the mesh's dimensions.
* :mod:`.rendering` -- pure builders for the token Secret, the headless Service and the pods.
* :mod:`.budgets` and :mod:`.placing` -- GPU memory budget math and node/device placement.
* :mod:`.planning` -- the pure decision of one reconcile: what to create, delete and report;
  :mod:`.upgrading` -- a mesh from before spec.placement, rendered as its existing pods are.
* :mod:`.statuses` -- one function per condition, and ``compute_status``;
  :mod:`.assigned_gpus` -- the GPU each proc was given, for ``status.procs[]``.
* :mod:`.kubeclient`, :mod:`.stores`, :mod:`.queueing` -- REST access, the pod cache, the work queue.
* :mod:`.reconciling` -- the ordered, effectful reconcile (secret -> service -> pods -> status).
* :mod:`.handlers` -- thin kopf handlers that feed the queue (:mod:`.diffbases`: kopf keeps no
  diff essence for them); :mod:`.__main__` -- the entry point.
"""

__version__ = "0.1.0"
