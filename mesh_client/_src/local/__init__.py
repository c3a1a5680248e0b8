"""The local backend: proc servers as OS processes of this machine (``this_host()``)."""
