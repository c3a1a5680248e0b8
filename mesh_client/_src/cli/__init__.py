"""The ``procmesh`` command line and kubectl plugin: :mod:`.main` parses, :mod:`.commands` runs,
:mod:`.tables` renders, :mod:`.logs` streams. It sits above the Kubernetes backend (whose API
wrapper and errors it uses) and the runtime's DESCRIBE call (for ``top``). Needs the
``kubernetes`` extra.
"""
