"""Test-only exit points (``--test-exit-after``): the operator process ends at once, as if
SIGKILLed, right after a named step, so that tests hit each crash window every time rather than
race it. Reached from :mod:`.token_secrets` (the token Secret's steps) and :mod:`.reconciling`
(a restart recorded in status before its pods are deleted); never set in production.
"""

from __future__ import annotations

import os

#: The token Secret created, its name not yet in status.
TOKEN_SECRET_CREATED = "token-secret-created"
#: The token Secret's name in status, the access Role not yet made.
TOKEN_SECRET_RECORDED = "token-secret-recorded"
#: A restart counted in status (its failed pods marked), the pods not yet deleted.
RESTART_RECORDED = "restart-recorded"
ALL = (TOKEN_SECRET_CREATED, TOKEN_SECRET_RECORDED, RESTART_RECORDED)
#: The exit status, a SIGKILL's as a shell reports it.
EXIT_STATUS = 137


def reached(configured: str | None, point: str) -> None:
    """End the process now if ``configured`` (the settings' ``test_exit_after``) is ``point``."""
    if configured == point:
        os._exit(EXIT_STATUS)  # as abrupt as SIGKILL: no cleanup, nothing flushed
