"""The proc server: the process that hosts actors, locally and in every pod.

``main`` reads its settings from the environment, listens, authenticates every connection
(:mod:`mesh_client._src.wire`) and hands each message to :mod:`.dispatch`, which queues it for
the actor's own thread (:mod:`.actors`).
"""
