"""The proc server's wire: framing, authentication and serialization, free of the actor layer.

Layering (checked by .importlinter): ``wire`` knows nothing of actors; ``runtime`` moves frames
over sockets; ``actor`` builds the user API on ``runtime``; ``server`` and ``local`` sit on top.
"""
