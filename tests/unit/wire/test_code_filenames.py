"""By-value code keeps the file name it was compiled under (cloudpickle alone writes
``<dynamic-code>``), nested code included, and ``dumps`` reports those file names.

Aspects: a function made from source under a file name that exists nowhere round-trips with its
``co_filename`` and its nested function's; ``code_files`` lists the name; small plain data takes
the fast path and reports none; the round-tripped function still runs.
"""

import pickle

from mesh_client._src.wire import serialization

SOURCE = """
def outer(x):
    def inner(y):
        return y * 2
    return inner(x) + 1
"""


def made_in(filename):
    namespace = {"__name__": "__main__"}  # pickled by value, as a script's function is
    exec(compile(SOURCE, filename, "exec"), namespace)
    return namespace["outer"]


def test_a_by_value_function_keeps_its_file_name_and_reports_it():
    files = set()
    fn = serialization.loads(serialization.dumps(made_in("/nowhere/controller.py"), files))
    assert fn(3) == 7
    assert fn.__code__.co_filename == "/nowhere/controller.py"
    nested = [c for c in fn.__code__.co_consts if hasattr(c, "co_filename")]
    assert nested and nested[0].co_filename == "/nowhere/controller.py"
    assert files == {"/nowhere/controller.py"}


def test_plain_data_reports_no_code():
    files = set()
    segments = serialization.dumps((1, "two", [3.0]), files)
    assert files == set() and pickle.loads(segments[0]) == (1, "two", [3.0])
