"""The Kubernetes backend: ProcMesh resources as proc meshes (attach, or create from Python).

The operator turns a ProcMesh into pods and publishes their addresses in ``status.procs``; this
backend reads that and the token Secret through the API server, then talks to the proc servers
directly (the operator is never on the data path). Needs the ``kubernetes`` extra.
"""
