"""The ``procmesh`` command line (also installed as ``kubectl-procmesh``): ``main(argv)`` runs one
command and returns its exit status; ``entry()`` is the console script. Needs the ``kubernetes``
extra.
"""

from mesh_client._src.cli.main import entry, main

__all__ = ["entry", "main"]

if __name__ == "__main__":
    entry()
