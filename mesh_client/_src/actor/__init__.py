"""The actor API users see: actors, endpoints, adverbs, meshes, values, context and errors.

Built on :mod:`mesh_client._src.runtime`; the proc server (:mod:`mesh_client._src.server`) hosts
what this layer describes, and the backends (:mod:`mesh_client._src.local`, kubernetes) create
the procs.
"""
