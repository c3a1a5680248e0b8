"""The fixture that runs a test on both implementations of the wire's per-message work: the C
module ``_frames.c`` (where built) and its Python twins, which installs without a C compiler
use (tests/unit/wire/conftest.py applies it to every wire test)."""

import pytest

from mesh_client._src.wire import envelopes, packing, protocol


@pytest.fixture(params=["native", "python"])
def frames_path(request, monkeypatch):
    if request.param == "python":
        monkeypatch.setattr(protocol, "_take", protocol._take_py)
        monkeypatch.setattr(envelopes, "request_parts", envelopes._request_parts_py)
        monkeypatch.setattr(packing, "request_frame", packing._request_frame_py)
        monkeypatch.setattr(packing, "reply_frame", packing._reply_frame_py)
    return request.param
