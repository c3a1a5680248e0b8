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
import weakref
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


#: Code shipped by value from the controller's script (an actor class, a function), unpickled
#: here with a globals dict that no module of ``sys.modules`` holds, by id; weakly, so what a
#: stopped actor held is freed as before, and only what is still alive at the end is finalized.
_SHIPPED: dict[int, weakref.ref[Any]] = {}


def shipped(obj: object) -> None:
    """Note ``obj`` (a class or a function) if its code came by value from the controller's
    script (cloudpickle gives such code a ``__main__`` globals dict of its own). Best effort:
    nothing here may fail a spawn."""
    try:
        if _own_globals(obj):
            for key in [k for k, ref in _SHIPPED.items() if ref() is None]:
                del _SHIPPED[key]  # code already gone: no globals left to clear
            _SHIPPED[id(obj)] = weakref.ref(obj)
    except Exception:
        pass


def _functions(obj: object) -> list[types.FunctionType]:
    if isinstance(obj, types.FunctionType):
        return [obj]
    if not isinstance(obj, type):
        return []
    out = []
    for klass in obj.__mro__:  # a base of the script's too; library bases have their modules
        for member in vars(klass).values():
            if isinstance(member, (classmethod, staticmethod)):
                member = member.__func__
            if isinstance(member, types.FunctionType):
                out.append(member)
    return out


def _own_globals(obj: object) -> list[dict[str, Any]]:
    """The shipped globals of ``obj``'s functions: a ``__main__`` dict that is not this
    process's ``__main__`` (generated code such as a namedtuple's has globals of its own, and
    is not the user's)."""
    main = getattr(sys.modules.get("__main__"), "__dict__", None)
    found: dict[int, dict[str, Any]] = {}
    for function in _functions(obj):
        namespace = function.__globals__
        if namespace.get("__name__") == "__main__" and namespace is not main:
            found[id(namespace)] = namespace
    return list(found.values())


def finalize() -> None:
    try:
        atexit._run_exitfuncs()
    except Exception:
        pass
    namespaces = [getattr(module, "__dict__", None) for name, module in list(sys.modules.items())
                  if module is not None and user_module(name, module)]
    for ref in list(_SHIPPED.values()):
        obj = ref()
        if obj is not None:
            namespaces.extend(_own_globals(obj))
    _SHIPPED.clear()
    for namespace in namespaces:
        if not isinstance(namespace, dict):
            continue
        try:  # a thread still running may change it meanwhile
            for key in [k for k in list(namespace) if not k.startswith("__")]:
                namespace[key] = None
        except RuntimeError:
            pass
    gc.collect()
