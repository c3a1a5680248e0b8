"""Worker addresses in Monarch's forms parse into (dial, bind).

Aspects: a plain channel URL; a proc id before '@'; an advertised address with a bind address
after '@'; '*' binds every interface; other transports and missing ports say what to write.
"""

import pytest

from mesh_client._src.local.workers import parse_address


def test_forms():
    assert parse_address("tcp://10.0.0.7:26600") == (("10.0.0.7", 26600), ("10.0.0.7", 26600))
    assert parse_address("service<2MuAHeDjLCEd>@tcp://w-0:4444") == (("w-0", 4444), ("w-0", 4444))
    assert parse_address("tcp://w-0.svc:4444@tcp://0.0.0.0:4444") == (("w-0.svc", 4444), ("0.0.0.0", 4444))
    assert parse_address("tcp://*:4444")[1] == ("0.0.0.0", 4444)
    assert parse_address("tcp://[::1]:5") == (("::1", 5), ("::1", 5))


def test_errors_say_what_to_write():
    with pytest.raises(ValueError, match="only tcp://"):
        parse_address("ipc://some-socket:1")
    with pytest.raises(ValueError, match="host:port"):
        parse_address("tcp://nohost")
