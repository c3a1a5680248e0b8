"""Derived names stay valid DNS labels for the longest mesh name and the largest rank."""

import re

from procmesh_operator import names

DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


def test_longest_names_are_dns_labels():
    mesh = "m" * names.MAX_MESH_NAME
    for derived in (names.pod_name(mesh, names.MAX_PROCS - 1), names.service_name(mesh),
                    names.secret_name(mesh)):
        assert len(derived) <= 63 and DNS_LABEL.match(derived), derived


def test_rank_of_pod_name():
    assert names.rank_of_pod_name("a-b", "a-b-12") == 12
    assert names.rank_of_pod_name("a-b", "a-b-012") is None
    assert names.rank_of_pod_name("a-b", "a-b-procs") is None
    assert names.rank_of_pod_name("a", "b-1") is None


def test_selector_matches_labels():
    labels = names.mesh_labels("x")
    assert all(labels[k] == v for k, v in names.mesh_selector("x").items())
    assert names.mesh_label_selector("x") == "procmesh.io/mesh=x"
