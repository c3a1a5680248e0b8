"""The proc server entry point: ``python -m mesh_client.proc_server`` (or ``procmesh-proc-server``).

Settings come from ``PROCMESH_*`` variables: ``PROCMESH_LISTEN_HOST``, ``PROCMESH_PORT``,
``PROCMESH_TOKEN`` or ``PROCMESH_TOKEN_FILE`` (required), ``PROCMESH_MEMORY_FRACTION``,
``PROCMESH_MESH``, ``PROCMESH_RANK``, ``PROCMESH_COORDS``, ``PROCMESH_MAX_MESSAGE_BYTES``,
``PROCMESH_MAX_UNAUTHENTICATED`` (256), ``PROCMESH_HANDSHAKE_TIMEOUT_SECONDS`` (10).
"""

from mesh_client._src.server.main import main

__all__ = ["main"]

if __name__ == "__main__":
    main()
