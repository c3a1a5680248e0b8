"""Monarch's Uid and ProcId values.

Aspects: an instance is written ``label<base58>`` (Monarch's ``Uid.instance_from_value(5, "x")``
is ``x<6>``), without a label ``<base58>``, a singleton as its bare label; ``from_string`` parses
each form back and refuses others; fresh instances differ; a ProcId wraps a Uid, and both compare,
hash and pickle by value.
"""

import pickle

import pytest

from mesh_client import ProcId, Uid


def test_the_text_forms_are_monarchs():
    assert str(Uid.instance_from_value(5, "x")) == "x<6>"
    assert str(Uid.instance_from_value(0, "z")) == "z<1>"
    assert str(Uid.instance_from_value(2**64 - 1)) == "<JPwcyDCgEup>"
    assert str(Uid.instance_from_value(58)) == "<21>" and str(Uid.instance_from_value(57)) == "<Z>"
    assert str(Uid.instance_from_value(10886806756100891529, "worker")) == "worker<rgHhmHdjQNM>"
    assert str(Uid.from_string("service")) == "service"


@pytest.mark.parametrize("text", ["x<6>", "<6>", "worker<rgHhmHdjQNM>", "service"])
def test_from_string_parses_each_form_back(text):
    uid = Uid.from_string(text)
    assert str(uid) == text and Uid.from_string(str(uid)) == uid
    assert uid.is_singleton == ("<" not in text) and uid.is_instance == ("<" in text)


def test_parts():
    uid = Uid.from_string("x<6>")
    assert (uid.label, uid.instance_value) == ("x", 5)
    assert (Uid.from_string("<6>").label, Uid.from_string("foo").instance_value) == (None, None)


@pytest.mark.parametrize("text", ["", "a b", "x<0>", "x<>", "a.b<2>"])
def test_other_text_is_refused(text):
    with pytest.raises(ValueError, match="invalid uid"):
        Uid.from_string(text)


def test_fresh_instances_differ_and_keep_their_label():
    a, b = Uid.instance("worker"), Uid.instance("worker")
    assert a != b and a.label == "worker" and a.is_instance
    assert Uid.anonymous().label is None


def test_proc_ids_are_values():
    uid = Uid.instance("proc")
    proc = ProcId(uid)
    assert str(proc) == str(uid) and proc.uid == uid and proc.label == "proc"
    assert ProcId.from_string(str(proc)) == proc and len({proc, ProcId(uid)}) == 1
    assert pickle.loads(pickle.dumps(proc)) == proc and pickle.loads(pickle.dumps(uid)) == uid
    with pytest.raises(TypeError, match="Uid"):
        ProcId("proc<6>")
