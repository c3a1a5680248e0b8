"""The CLI's arguments: values the API server would refuse once per pod are refused up front."""

import pytest

from mesh_client._src.cli import main


@pytest.mark.parametrize("args", [["logs", "m", "--tail", "-5"], ["top", "m", "--timeout", "0"],
                                  ["top", "m", "--timeout=-1s"]])
def test_refused_by_the_parser(args, capsys):
    with pytest.raises(SystemExit) as info:
        main.build_parser().parse_args(args)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "give 0 or more lines" in err or "give a duration above 0" in err, err


@pytest.mark.parametrize("command", [["top", "m"], ["wait", "m"], ["delete", "m", "--wait"]])
@pytest.mark.parametrize("timeout", [["--timeout", "-5s"], ["--timeout=-5s"], ["--timeout", "-1"],
                                     ["--timeout", "0"], ["--timeout", "0s"], ["--timeout", "-.5m"]])
def test_a_timeout_that_leaves_no_time_is_refused_as_such(command, timeout, capsys):
    """Every command's --timeout, with or without '=': a negative one written apart was taken for
    an option ('expected one argument'), and wait's and delete's took 0 or less."""
    with pytest.raises(SystemExit) as info:
        main.build_parser().parse_args([*command, *timeout])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert f"error: argument --timeout: {timeout[-1].removeprefix('--timeout=')!r}: give a duration above 0 " \
           f"(like 5s)" in err, err


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e999s", "5x", ""])
def test_a_timeout_that_is_no_duration_is_refused(value, capsys):
    """'nan' was accepted by wait and delete, and their deadline never passed."""
    with pytest.raises(SystemExit):
        main.build_parser().parse_args(["wait", "m", f"--timeout={value}"])
    assert f"{value!r} is not a duration (like 30s, 5m or 1h)" in capsys.readouterr().err


def test_accepted():
    parser = main.build_parser()
    assert parser.parse_args(["logs", "m", "--tail", "0"]).tail == 0
    assert parser.parse_args(["top", "m", "--timeout", "2s"]).timeout == 2.0
    assert parser.parse_args(["wait", "m", "--timeout", "1.5m"]).timeout == 90.0
    assert parser.parse_args(["delete", "m", "--timeout", "90"]).timeout == 90.0


def test_a_mesh_is_named_as_kubectl_names_it():
    """NAME, or TYPE/NAME as ``get -o name`` prints it; another type is refused up front (a name
    with a slash read as a URL path said the CRD was not installed)."""
    parser = main.build_parser()
    assert parser.parse_args(["delete", "procmesh.procmesh.io/a", "pm/b", "procmeshes/c", "d"]).names == \
        ["a", "b", "c", "d"]
    assert parser.parse_args(["logs", "ProcMesh/a"]).name == "a"
    for bad in ("pod/a", "a/b/c", "pm/", "", ".", "..", "pm/.."):
        with pytest.raises(SystemExit) as info:
            parser.parse_args(["get", bad])
        assert info.value.code == 2

    with pytest.raises(SystemExit):
        parser.parse_args(["get", "-n", "a/b"])
