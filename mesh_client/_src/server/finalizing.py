"""Ending a proc the way an interpreter ends: atexit handlers, then the user's module globals.

A proc server leaves with ``os._exit`` (a forked proc must not unwind into the zygote's stack),
which would skip finalizers. Monarch's procs run ``Py_FinalizeEx``, so a ``__del__`` on a module
global fires when ``ProcMesh.stop()`` ends the proc; :func:`finalize` gives the same: it runs the
atexit handlers and then drops the globals of user modules (not the standard library, not
installed packages, not procmesh itself) and of code shipped by value (:func:`shipped`), so
their objects are finalized. Called by
:mod:`.main` after the actors' ``__cleanup__``.
"""

from __future__ import annotations

import atexit
import gc
import os
import sys
import sysconfig
import types
from typing import Any

_INSTALLED = tuple(
    os.path.realpath(p) + os.sep for p in {sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
)
_OURS = ("mesh_client", "procmesh_operator")
_OUR_DIR = os.path.realpath(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))) + os.sep


def user_module(name: str, module: object) -> bool:
    """A module of the user's program: ``__main__``, code shipped by value, or files outside the
    interpreter's own library and site-packages."""
    spec = getattr(module, "__spec__", None)
    if (getattr(spec, "name", None) or name).split(".")[0] in _OURS or name in sys.builtin_module_names:
        return False  # ``python -m mesh_client...`` makes one of ours ``__main__``
    path = getattr(module, "__file__", None)
    if not path:
        return name == "__main__"
    path = os.path.realpath(path)
    return not path.startswith(_INSTALLED) and not path.startswith(_OUR_DIR)


#: The globals of code shipped by value (an actor class or a function of the controller's
#: script, unpickled here): no module of ``sys.modules`` holds them, so :func:`finalize` clears
#: them from this list. By id, each kept once.
_SHIPPED: dict[int, dict[str, Any]] = {}


def shipped(obj: object) -> None:
    """Note the globals of ``obj`` (a class: its methods'; a function: its own) where they are
    no module's, as cloudpickle gives code of the controller's script a dict of its own."""
    functions: list[Any] = [obj] if isinstance(obj, types.FunctionType) else []
    if isinstance(obj, type):
        for klass in obj.__mro__:
            for member in vars(klass).values():
                member = getattr(member, "__func__", member)  # classmethod, staticmethod
                if isinstance(member, types.FunctionType):
                    functions.append(member)
    for function in functions:
        namespace = function.__globals__
        module = sys.modules.get(str(namespace.get("__name__")))
        if namespace is not getattr(module, "__dict__", None):
            _SHIPPED.setdefault(id(namespace), namespace)


def finalize() -> None:
    try:
        atexit._run_exitfuncs()
    except Exception:
        pass
    namespaces = [getattr(module, "__dict__", None) for name, module in list(sys.modules.items())
                  if module is not None and user_module(name, module)]
    for namespace in [*namespaces, *_SHIPPED.values()]:
        if isinstance(namespace, dict):
            for key in [k for k in namespace if not k.startswith("__")]:
                namespace[key] = None
    _SHIPPED.clear()
    gc.collect()
