"""procmesh_operator: the kopf operator that turns ProcMesh resources into pods.

Layout (each module one concern, imported as a module):

* :mod:`.names` -- child names, labels, selectors and annotation keys (the one place for them).
* :mod:`.specs` and :mod:`.shapes` -- the parsed spec with its defaults, and rank arithmetic.
* :mod:`.rendering` -- pure builders for the token Secret, the headless Service and the pods.
* :mod:`.budgets` and :mod:`.placing` -- GPU memory budget math and node/device placement.
* :mod:`.planning` -- the pure decision of one reconcile: what to create, delete and report.
* :mod:`.statuses` -- conditions, reasons and ``compute_status``.
* :mod:`.kubeclient`, :mod:`.stores`, :mod:`.queueing` -- REST access, the pod cache, the work queue.
* :mod:`.reconciling` -- the ordered, effectful reconcile (secret -> service -> pods -> status).
* :mod:`.handlers` -- thin kopf handlers that feed the queue; :mod:`.__main__` -- the entry point.
"""

__version__ = "0.1.0"
