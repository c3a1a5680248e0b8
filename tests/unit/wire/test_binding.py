"""Which proc a handshake is meant for (wire/binding.py) and how the sans-IO connection keeps to it.

Aspects: a proc id round-trips through its wire form, and bad ids are refused with what to do;
only the proc meant (or any proc, for a client that means none) answers; the refusal names both
procs; a server refuses a handshake meant for another proc, and a client an answer from one,
each inside the MAC (a relay that rewrites the name breaks the proof); the client tells the
server's wrong-proc REJECT from a wrong token; a peer one protocol version older is refused with
a version mismatch on either side, never a handshake without the binding.
"""

import pytest

from mesh_client._src.wire import auth, binding, errors, frames, protocol, versions
from mesh_client._src.wire.protocol import NEED_DATA, Connection, Role, State

TOKEN = b"s3cret-token"
ONE = binding.ProcId("a" * 32, "trainer[1]")
TWO = binding.ProcId("b" * 32, "trainer[2]")


def test_a_proc_id_round_trips_and_none_is_empty():
    assert binding.decode(binding.encode(ONE)) == ONE
    assert binding.encode(None) == b"" and binding.decode(b"") is None
    long = binding.ProcId("x", "n" * 500)
    assert len(binding.encode(long)) == 2 + binding.MAX_NAME_BYTES  # names are cut, ids never


@pytest.mark.parametrize("bad", ["", "a b", "x" * 65, "é", "tab\t"])
def test_a_malformed_incarnation_is_refused_saying_what_it_must_be(bad):
    with pytest.raises(ValueError, match="printable ASCII characters without spaces"):
        binding.ProcId(bad, "p[0]")


def test_only_the_proc_meant_answers():
    assert binding.answers_for(ONE, ONE)
    assert binding.answers_for(binding.ProcId(ONE.incarnation, "other name"), ONE)  # the id decides
    assert not binding.answers_for(ONE, TWO)
    assert not binding.answers_for(ONE, None)  # a proc that does not say which it is
    assert binding.answers_for(None, TWO) and binding.answers_for(None, None)  # the client meant any


def test_the_refusal_names_both_procs():
    text = binding.refusal(ONE, TWO)
    assert text.startswith(binding.REFUSAL.decode())
    assert f"trainer[1] (incarnation {'a' * 32})" in text and f"trainer[2] (incarnation {'b' * 32})" in text


def handshake(client: Connection, server: Connection) -> None:
    """HELLO, then AUTH: leaves the server's answer (WELCOME or REJECT) unsent."""
    server.start()
    client.start()
    client.receive_data(server.data_to_send())
    assert client.next_event() is NEED_DATA
    server.receive_data(client.data_to_send())


def test_the_proc_meant_authenticates_both_sides():
    client, server = Connection(Role.CLIENT, TOKEN, meant=ONE), Connection(Role.SERVER, TOKEN, own=ONE)
    handshake(client, server)
    assert isinstance(server.next_event(), protocol.Authenticated)
    client.receive_data(server.data_to_send())
    assert isinstance(client.next_event(), protocol.Authenticated)


def test_a_client_that_means_no_proc_is_answered_by_any():
    client, server = Connection(Role.CLIENT, TOKEN), Connection(Role.SERVER, TOKEN, own=TWO)
    handshake(client, server)
    assert isinstance(server.next_event(), protocol.Authenticated)
    client.receive_data(server.data_to_send())
    assert isinstance(client.next_event(), protocol.Authenticated)


def test_a_server_refuses_a_handshake_meant_for_another_proc_and_says_why():
    client, server = Connection(Role.CLIENT, TOKEN, meant=ONE), Connection(Role.SERVER, TOKEN, own=TWO)
    handshake(client, server)
    with pytest.raises(errors.WrongProc, match=r"meant for proc trainer\[1\] .* reached trainer\[2\]"):
        server.next_event()
    assert server.state is State.CLOSED
    client.receive_data(server.data_to_send())  # the REJECT
    with pytest.raises(errors.WrongProc, match=r"refused the connection: this connection was meant for proc trainer\[1\]"):
        client.next_event()


def test_a_server_without_an_id_refuses_a_client_that_means_one():
    client, server = Connection(Role.CLIENT, TOKEN, meant=ONE), Connection(Role.SERVER, TOKEN)
    handshake(client, server)
    with pytest.raises(errors.WrongProc, match="a proc that does not say which it is"):
        server.next_event()


def test_a_relay_cannot_rename_the_proc_meant():
    """The name is inside the client's MAC: rewritten, the proof fails as a wrong token."""
    client, server = Connection(Role.CLIENT, TOKEN, meant=ONE), Connection(Role.SERVER, TOKEN, own=TWO)
    server.start()
    client.start()
    client.receive_data(server.data_to_send())
    client.next_event()
    auth_frame = client.data_to_send()
    forged = auth_frame.replace(ONE.incarnation.encode(), TWO.incarnation.encode())
    assert forged != auth_frame
    server.receive_data(forged)
    with pytest.raises(errors.AuthenticationError, match="wrong mesh token"):
        server.next_event()


def test_a_client_refuses_an_answer_from_another_proc():
    """A server that does not check (a relayed connection to a proc that would answer any):
    its WELCOME names itself inside its MAC, and the client refuses it."""
    client, server = Connection(Role.CLIENT, TOKEN, meant=ONE), Connection(Role.SERVER, TOKEN, own=TWO)
    server.start()
    client.start()
    nonce = server.data_to_send()[-auth.NONCE_BYTES:]
    client.receive_data(frames.encode_bytes(frames.Kind.HELLO, [nonce], versions.PROTOCOL_VERSION))
    client.next_event()
    client_nonce = client.data_to_send()[frames.HEADER.size + 8: frames.HEADER.size + 8 + auth.NONCE_BYTES]
    own = binding.encode(TWO)
    welcome = auth.server_mac(TOKEN, nonce, client_nonce, own) + own
    client.receive_data(frames.encode_bytes(frames.Kind.WELCOME, [welcome], versions.PROTOCOL_VERSION))
    with pytest.raises(errors.WrongProc, match=r"meant for proc trainer\[1\] .* reached trainer\[2\]"):
        client.next_event()
    assert client.state is State.CLOSED
    # Its name rewritten to the one meant, the proof fails.
    client = Connection(Role.CLIENT, TOKEN, meant=ONE)
    client.start()
    client.receive_data(frames.encode_bytes(frames.Kind.HELLO, [nonce], versions.PROTOCOL_VERSION))
    client.next_event()
    client_nonce = client.data_to_send()[frames.HEADER.size + 8: frames.HEADER.size + 8 + auth.NONCE_BYTES]
    forged = auth.server_mac(TOKEN, nonce, client_nonce, own) + binding.encode(ONE)
    client.receive_data(frames.encode_bytes(frames.Kind.WELCOME, [forged], versions.PROTOCOL_VERSION))
    with pytest.raises(errors.AuthenticationError, match="could not prove it holds the mesh token"):
        client.next_event()


def test_peers_of_the_protocol_before_the_binding_get_a_version_mismatch_not_an_unbound_handshake():
    before = versions.PROTOCOL_VERSION - 1
    # A new client meeting an older server: refused on its HELLO, before any AUTH goes out.
    client, old_server = Connection(Role.CLIENT, TOKEN, meant=ONE), Connection(Role.SERVER, TOKEN, protocol_version=before)
    old_server.start()
    client.start()
    client.receive_data(old_server.data_to_send())
    with pytest.raises(errors.VersionMismatch, match=f"the proc server speaks protocol {before}, this client"):
        client.next_event()
    assert client.data_to_send() == b""
    # An older client meeting a new server: refused on the server's HELLO too ...
    old_client, server = Connection(Role.CLIENT, TOKEN, protocol_version=before), Connection(Role.SERVER, TOKEN, own=ONE)
    server.start()
    old_client.start()
    hello = server.data_to_send()
    old_client.receive_data(hello)
    with pytest.raises(errors.VersionMismatch, match=f"the proc server speaks protocol {versions.PROTOCOL_VERSION}"):
        old_client.next_event()
    # ... and one that sent its unbound AUTH anyway is rejected for its version, with the fix.
    mac = auth.client_mac(TOKEN, hello[-auth.NONCE_BYTES:], b"n" * auth.NONCE_BYTES)
    server.receive_data(frames.encode_bytes(frames.Kind.AUTH, [b"n" * auth.NONCE_BYTES + mac], before))
    with pytest.raises(errors.VersionMismatch, match=f"the client speaks protocol {before}.*install in the client"):
        server.next_event()
    assert server.state is State.CLOSED
