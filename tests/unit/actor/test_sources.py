"""The controller's source text for remote tracebacks: collected from linecache, registered in
another process's linecache so tracebacks there show the lines.

Aspects: ``collect`` reads files through linecache (a real file, and an entry only linecache
knows, as a notebook cell is) and skips unknown names, ``<dynamic-code>`` and files past the size
bound; each text goes once per connection (again when it changed); after ``register`` a
traceback of code compiled under a file name that does not exist shows its source line, also
after ``linecache.checkcache``.
"""

import linecache
import traceback

from mesh_client._src.actor import sources


def test_collect_reads_files_and_cells_and_skips_what_it_cannot_ship(tmp_path):
    script = tmp_path / "script.py"
    script.write_text("x = 1\n")
    linecache.cache["<cell-1>"] = (6, None, ["y = 2\n"], "<cell-1>")
    big = tmp_path / "big.py"
    big.write_text("#" * (sources.MAX_FILE_CHARS + 1))
    got = sources.collect([str(script), "<cell-1>", "/no/such/file.py", "<dynamic-code>", str(big)])
    assert got == {str(script): "x = 1\n", "<cell-1>": "y = 2\n"}


def test_registered_text_shows_in_tracebacks_of_a_file_that_does_not_exist():
    name = "/nowhere/registered_script.py"
    text = "def f():\n    raise KeyError('from the script')\n"
    sources.register({name: text})
    namespace: dict = {}
    exec(compile(text, name, "exec"), namespace)
    linecache.checkcache()  # must keep the entry: it has no file to check against
    try:
        namespace["f"]()
    except KeyError as exc:
        shown = "".join(traceback.format_exception(exc))
    assert f'File "{name}", line 2, in f\n    raise KeyError(\'from the script\')' in shown


def test_each_text_goes_once_per_connection():
    class Connection:
        pass

    first, second = Connection(), Connection()
    texts = {"/a.py": "a = 1\n", "/b.py": "b = 2\n"}
    assert sources.not_yet_sent(first, texts) == texts
    assert sources.not_yet_sent(first, texts) == {}
    assert sources.not_yet_sent(first, {"/a.py": "a = 3\n"}) == {"/a.py": "a = 3\n"}  # changed: again
    assert sources.not_yet_sent(second, texts) == texts  # another connection (a restarted proc's)
