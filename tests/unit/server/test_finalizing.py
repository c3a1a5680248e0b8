"""What a proc's end finalizes of code shipped by value (cloudpickle's own ``__main__`` globals).

Aspects: a by-value class's globals are cleared at the end, this process's own ``__main__`` and
generated code (a namedtuple) are not noted, code already gone is not kept alive, and an odd
class attribute never fails a spawn.
"""

import collections
import gc
import pickle
import weakref

import cloudpickle

from mesh_client._src.server import finalizing


def by_value():
    """A class as a proc gets it from a controller's script: its globals a dict of its own."""
    namespace = {"__name__": "__main__"}
    exec(
        "class Held:\n"
        "    def __init__(self, box):\n"
        "        self.box = box\n"
        "    def __del__(self):\n"
        "        self.box.append('finalized')\n"
        "class Holder:\n"
        "    def keep(self, box):\n"
        "        global held\n"
        "        held = Held(box)\n", namespace)
    return namespace["Holder"]


def test_a_by_value_classs_globals_are_finalized_at_the_end(monkeypatch):
    monkeypatch.setattr(finalizing, "_SHIPPED", {})
    monkeypatch.setattr(finalizing.atexit, "_run_exitfuncs", lambda: None)
    monkeypatch.setattr(finalizing, "user_module", lambda name, module: False)
    holder, box = by_value(), []
    holder().keep(box)
    finalizing.shipped(holder)
    finalizing.finalize()
    assert box == ["finalized"]


def test_only_shipped_code_is_noted_and_weakly(monkeypatch):
    monkeypatch.setattr(finalizing, "_SHIPPED", {})
    point = collections.namedtuple("P", "x y")  # generated code, globals of its own
    finalizing.shipped(point)
    finalizing.shipped(test_only_shipped_code_is_noted_and_weakly)  # an importable module's
    assert finalizing._SHIPPED == {}
    holder = by_value()
    finalizing.shipped(holder)
    gone = weakref.ref(holder)
    del holder
    gc.collect()
    assert gone() is None  # noting it kept nothing alive
    again = pickle.loads(cloudpickle.dumps(by_value()))  # the next spawn prunes the dead entry
    finalizing.shipped(again)
    assert list(finalizing._SHIPPED) == [id(again)]


def test_an_odd_class_attribute_never_fails_a_spawn(monkeypatch):
    monkeypatch.setattr(finalizing, "_SHIPPED", {})

    class Lazy:
        def __getattr__(self, name):
            raise ImportError("a lazy module that is not installed")

    holder = by_value()
    holder.lazy = Lazy()
    finalizing.shipped(holder)
    assert list(finalizing._SHIPPED) == [id(holder)]
