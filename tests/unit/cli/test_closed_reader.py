"""A command that printed, then failed, into an output whose reader had gone (cli/main.py):
the flush met the closed pipe only at interpreter exit ('Exception ignored ... BrokenPipeError',
status 120) after the error line; now it is the closed output's quiet 141. A stand-in command
(no API request) and a stand-in output whose flush fails as a closed pipe's does."""

import io

import pytest

from mesh_client._src.cli import commands, main
from mesh_client._src.kubernetes.errors import KubernetesMeshError

KUBECONFIG = """
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:9"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u, namespace: ns}}]
current-context: x
"""


class ClosedReader(io.StringIO):
    def flush(self):
        if self.getvalue():
            raise BrokenPipeError(32, "Broken pipe")


@pytest.mark.parametrize("failure, status", [(KubernetesMeshError("the second mesh failed"), 1),
                                             (KeyboardInterrupt(), 130)])
def test_a_failure_after_output_to_a_closed_reader_is_the_closed_outputs(failure, status, tmp_path, monkeypatch,
                                                                          capsys):
    config = tmp_path / "kubeconfig"
    config.write_text(KUBECONFIG)

    def printed_then_failed(api, args, out):
        out.write("NAME  READY\n")
        raise failure

    monkeypatch.setitem(commands.COMMANDS, "get", printed_then_failed)
    assert main.main(["--kubeconfig", str(config), "get"], out=ClosedReader()) == main.OUTPUT_CLOSED
    assert capsys.readouterr().err == ""
    # With a reader there, the failure is said as before.
    assert main.main(["--kubeconfig", str(config), "get"], out=io.StringIO()) == status
