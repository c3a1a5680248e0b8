"""Moving frames over sockets: streams, the I/O thread, connections, futures and calls.

Built on :mod:`mesh_client._src.wire`; knows nothing of actors.
"""
