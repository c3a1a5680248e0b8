"""A real proc server speaking protocol 0, as releases before protocol versions did (their
handshake frames carry 0 in the header's field): what a client meets on an older image."""

from mesh_client._src.wire import versions

versions.PROTOCOL_VERSION = 0

from mesh_client._src.server.main import main  # noqa: E402  (after the version is set)

main()
