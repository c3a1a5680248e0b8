"""How the operator's API client reads answers: JSON bodies, JSON Status errors, and the plain
text a real API server sends for a group version it does not serve (found on a 1.33-emulating
control plane: the operator retried a JSON decoding error forever instead of reporting
DRANotServed)."""

import pytest

from procmesh_operator import kubeclient


def test_a_json_body_is_returned():
    assert kubeclient.decode(200, "OK", '{"items": []}') == {"items": []}
    assert kubeclient.decode(200, "OK", "") is None


def test_a_json_status_error_keeps_reason_and_message():
    with pytest.raises(kubeclient.ApiError) as info:
        kubeclient.decode(409, "Conflict", '{"kind": "Status", "reason": "AlreadyExists", '
                                           '"message": "pods \\"p-0\\" already exists"}')
    assert info.value.conflict and info.value.reason == "AlreadyExists"
    assert info.value.message == 'pods "p-0" already exists'


def test_a_plain_text_404_is_not_found():
    with pytest.raises(kubeclient.ApiError) as info:
        kubeclient.decode(404, "Not Found", "404 page not found\n")
    assert info.value.not_found and info.value.message == "404 page not found"


def test_a_success_that_is_not_json_is_an_error_that_shows_the_body():
    with pytest.raises(kubeclient.ApiError, match="not JSON: '<html>"):
        kubeclient.decode(200, "OK", "<html>proxy login</html>")
