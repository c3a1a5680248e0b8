"""The actor API under Monarch's module name: ``from mesh_client.actor import ...``."""

from mesh_client import *  # noqa: F403
from mesh_client import __all__  # noqa: F401
