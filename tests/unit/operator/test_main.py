"""The command line: a namespace scope is required; kopf credentials mirror the client's."""

import pytest

from procmesh_operator import __main__ as main_module
from procmesh_operator import kubeclient


def test_scope_is_required_and_exclusive():
    with pytest.raises(SystemExit):
        main_module.parse_args([])
    with pytest.raises(SystemExit):
        main_module.parse_args(["-n", "a", "-A"])
    args = main_module.parse_args(["-n", "a", "-n", "b"])
    assert args.namespace == ["a", "b"] and not args.all_namespaces
    assert args.liveness.startswith("http://127.0.0.1:")
    assert main_module.parse_args(["-A"]).all_namespaces


def test_connection_info_from_configuration():
    import kubernetes

    config = kubernetes.client.Configuration()
    config.host = "https://127.0.0.1:6443"
    config.ssl_ca_cert = "/ca.crt"
    config.api_key = {"authorization": "Bearer abc"}
    info = main_module.connection_info(config)
    assert (info.server, info.ca_path, info.scheme, info.token) == (
        "https://127.0.0.1:6443", "/ca.crt", "Bearer", "abc")


@pytest.mark.parametrize("path,resource", [
    ("/api/v1/namespaces/ns/pods", "pods"),
    ("/api/v1/namespaces/ns/pods/m-1", "pods"),
    ("/api/v1/pods", "pods"),
    ("/api/v1/nodes", "nodes"),
    ("/apis/procmesh.io/v1alpha1/namespaces/ns/procmeshes/m/status", "procmeshes/status"),
    ("/apis/procmesh.io/v1alpha1/namespaces/ns/procmeshes/m", "procmeshes"),
])
def test_request_counter_resource(path, resource):
    assert kubeclient._resource_of(path) == resource


def test_priority_is_an_integer_or_random() -> None:
    assert main_module.parse_args(["-A", "--priority", "5"]).priority == 5
    drawn = {main_module.parse_args(["-A", "--priority", "random"]).priority for _ in range(5)}
    assert all(p > 0 for p in drawn) and len(drawn) > 1  # replicas must not tie
    with pytest.raises(SystemExit):
        main_module.parse_args(["-A", "--priority", "high"])


def test_leader_election_needs_a_lease_name(capsys) -> None:
    args = main_module.parse_args(["-A", "--leader-election", "procmesh-operator",
                                   "--leader-election-namespace", "ops"])
    assert args.leader_election == "procmesh-operator" and args.standalone
    for bad in ("", "Procmesh", "-lease", "a_b"):
        with pytest.raises(SystemExit):
            main_module.parse_args(["-A", f"--leader-election={bad}",
                                    "--leader-election-namespace", "ops"])
        assert "--leader-election needs the name of a Lease" in capsys.readouterr().err


def test_the_open_files_limit_is_raised_to_the_hard_one() -> None:
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    lowered = min(soft, 256) if hard == resource.RLIM_INFINITY else min(soft, hard, 256)
    resource.setrlimit(resource.RLIMIT_NOFILE, (lowered, hard))
    try:
        main_module.raise_open_files_limit()
        raised, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        assert raised > lowered and (hard == resource.RLIM_INFINITY or raised == hard)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_an_ipv6_listen_address_written_for_urls_binds():
    """The chart's listenAddress on IPv6 clusters, [$(POD_IP)], reaches the metrics server as
    [fd00::1]: a socket takes it without brackets (getaddrinfo refused it; the operator exited)."""
    import socket

    assert main_module.bind_host("[::1]") == "::1"
    assert main_module.bind_host("127.0.0.1") == "127.0.0.1"
    assert socket.getaddrinfo(main_module.bind_host("[::1]"), 9090, type=socket.SOCK_STREAM)


def test_restart_backoff_flags_take_seconds_and_refuse_what_is_not(capsys) -> None:
    args = main_module.parse_args(["-A", "--restart-backoff-seconds", "0.5",
                                   "--restart-backoff-max-seconds", "0"])
    assert (args.restart_backoff_seconds, args.restart_backoff_max_seconds,
            args.restart_backoff_reset_seconds) == (0.5, 0.0, 600.0)
    for bad in ("-1", "nan", "inf"):
        with pytest.raises(SystemExit):
            main_module.parse_args(["-A", "--restart-backoff-reset-seconds", bad])
        assert f"--restart-backoff-reset-seconds must be a number of seconds, 0 or more, not " \
               f"{float(bad)}" in capsys.readouterr().err
