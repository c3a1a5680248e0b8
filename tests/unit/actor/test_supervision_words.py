"""Supervision reports are worded as Monarch's, from pure functions.

Aspects: a point prints as coordinate/size; an actor's display chains its owner; a failure report
indents its cause; MeshFailure's str names the mesh, ranks and event; str(Point) matches.
"""

from mesh_client import MeshFailure
from mesh_client._src.actor import supervision
from mesh_client._src.actor.shape import Extent, Point


class Lambda:
    pass


def test_point_text_and_str_point():
    assert supervision.point_text({"hosts": 1, "gpus": 0}, {"hosts": 2, "gpus": 4}) == "{'hosts': 1/2, 'gpus': 0/4}"
    assert str(Point(5, Extent(["hosts", "gpus"], [2, 4]))) == "{'hosts': 1/2, 'gpus': 1/4}"
    assert str(Point(0, Extent([], []))) == "{}"


def test_actor_display_chains_the_owner():
    display = supervision.actor_display("<root>", Lambda, "lam", {"gpus": 1}, {"gpus": 2})
    assert display == f"<root>.<{__name__}.Lambda lam{{'gpus': 1/2}}>"
    nested = supervision.actor_display(display, Lambda, "nested", {"a_dim": 0}, {"a_dim": 1})
    assert nested.startswith(display + ".<") and nested.endswith("nested{'a_dim': 0/1}>")


def test_failed_report_indents_its_cause():
    report = supervision.failed_report("<root>.<m.L lam{}>", "actor explicitly aborted due to: Traceback\n  File x\nValueError: e")
    assert report.splitlines() == [
        "The actor <root>.<m.L lam{}> and all its descendants have failed:",
        "  actor explicitly aborted due to: Traceback",
        "    File x",
        "  ValueError: e",
    ]


def test_mesh_failure_text():
    failure = MeshFailure("lam-abc", [1], "The actor <root>.<m.L lam{}> and all its descendants have failed:\n  boom")
    assert failure.report().endswith("boom")
    assert str(failure) == "MeshFailure(mesh_name=lam-abc, crashed_ranks=[1], event=Supervision event: actor <root>.<m.L lam{}> failed:\n  boom)"
