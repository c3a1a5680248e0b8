"""A kopf diff-base storage that keeps nothing, for an operator of event handlers only.

kopf builds the "essence" of every object on every watch event (a deep copy of the body, then
trimmed) to find what changed for ``on.create``/``on.update`` handlers, and copies it again to
clear progress fields. :mod:`.handlers` registers only ``on.event`` handlers, which never see
that diff, so at thousands of pods the copies were a sixth of the operator's CPU (profiled with
benchmarks/scale.py). :mod:`.handlers` installs :class:`NoDiffBase` at startup.
"""

from __future__ import annotations

from collections.abc import Iterable

import kopf


class NoDiffBase(kopf.DiffBaseStorage):
    """Builds an empty essence, remembers none: the diff kopf computes is always empty."""

    def build(self, *, body: kopf.Body,
              extra_fields: Iterable[kopf.FieldSpec] | None = None) -> kopf.BodyEssence:
        return kopf.BodyEssence()

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence | None:
        return None

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:
        return None
