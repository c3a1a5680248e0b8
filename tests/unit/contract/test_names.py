"""Child names and label keys of the contract.

Aspects: derived names stay valid DNS labels (and the Role a DNS subdomain) for the longest mesh
name and the largest rank; a pod name's rank reads back; the token Secret's name follows
``spec.tokenSecretName``, then ``status.tokenSecretName``, then the legacy ``<mesh>-token``; a
status name is trusted only if the operator could have generated it (the API server's
generateName cuts prefixes at 58 characters).
"""

import re

from mesh_client._src import contract

DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


def test_longest_names_are_dns_labels():
    mesh = "m" * contract.MAX_MESH_NAME
    for derived in (contract.pod_name(mesh, contract.MAX_PROCS - 1), contract.service_name(mesh),
                    contract.secret_name(mesh)):
        assert len(derived) <= 63 and DNS_LABEL.match(derived), derived
    assert len(contract.access_role_name(mesh)) <= 253


def test_rank_of_pod_name():
    assert contract.rank_of_pod_name("a-b", contract.pod_name("a-b", 12)) == 12
    assert contract.rank_of_pod_name("a-b", "a-b-012") is None
    assert contract.rank_of_pod_name("a-b", contract.service_name("a-b")) is None
    assert contract.rank_of_pod_name("a", "b-1") is None


def test_label_selector_names_the_mesh_label():
    assert contract.mesh_label_selector("x") == f"{contract.MESH_LABEL}=x"


def test_token_secret_name():
    assert contract.token_secret_name("m", None) == contract.secret_name("m") == "m-token"
    assert contract.token_secret_name("m", "m-token-1f2e") == "m-token-1f2e"
    assert contract.token_secret_name("m", None, "m-token-x7k2p") == "m-token-x7k2p"
    assert contract.token_secret_name("m", "m-token-1f2e", "m-token-x7k2p") == "m-token-1f2e"
    assert contract.token_secret_name("m", None, "m-token") == "m-token"  # recorded legacy


def test_status_names_only_what_the_operator_generates():
    for name in ("m-token", "m-token-x7k2p", "m-token-22bcz"):
        assert contract.is_operator_secret_name("m", name), name
    for name in ("db-password", "m-token-", "m-token-x7k2", "m-token-x7k2pq", "m-token-X7K2P",
                 "m-token-x7k.p", "mm-token-x7k2p", "m-tokenx7k2p",
                 "m-token-00101", "m-token-abcde",  # characters generateName never uses
                 "m-token-token"):  # the legacy Secret of mesh "m-token", not of "m"
        assert not contract.is_operator_secret_name("m", name), name
    try:
        contract.token_secret_name("m", None, "db-password")
    except ValueError as e:
        assert "db-password" in str(e) and "m-token-<random>" in str(e)
    else:
        raise AssertionError("a foreign status name was accepted")


def test_longest_mesh_name_has_its_generated_prefix_cut_as_the_api_server_does():
    mesh = "m" * contract.MAX_MESH_NAME
    prefix = contract.secret_name_prefix(mesh)
    assert len(prefix) > contract.GENERATED_PREFIX_MAX  # 52 + len("-token-") = 59
    generated = prefix[:contract.GENERATED_PREFIX_MAX] + "bx2cd"
    assert contract.is_operator_secret_name(mesh, generated) and len(generated) == 63
    assert DNS_LABEL.match(generated)
    assert not contract.is_operator_secret_name(mesh, prefix + "bx2cd")  # never generated


def test_the_contract_imports_only_the_standard_library():
    import ast
    import sys

    tree = ast.parse(open(contract.__file__).read())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.module}
    assert imported and imported <= sys.stdlib_module_names | {"__future__"}, imported
