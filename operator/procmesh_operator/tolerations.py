"""How one toleration of a pod meets one taint of a node, as the scheduler and the taint eviction
controller judge it: placement (:mod:`.fitting`), the node-loss tolerations the operator adds
(:mod:`.rendering`) and the time a pod may stay on a lost node (:mod:`.losses`) all ask here, so
they cannot disagree with Kubernetes or with each other."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """Whether one toleration tolerates ``taint``, as v1.36's ``Toleration.ToleratesTaint``
    (k8s.io/api core/v1 toleration.go) judges it: an empty effect or key matches every effect or
    key; operator Equal (or none) needs the same value, Exists matches any; Lt and Gt (KEP-5471)
    compare the taint's value with the toleration's as integers (Lt: the taint's is less) and
    match nothing when either is not a plain decimal int64 (``"0"``, ``"-5"``, ``"42"``: no
    leading zero or plus sign, no blank); any other operator matches nothing. The scheduler
    compares only while its TaintTolerationComparisonOperators gate (alpha in 1.35, off by
    default) is on; with it off, the API server refuses a new pod that uses Lt or Gt, so such a
    pod is never created to be judged."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if key and key != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    value, taint_value = _text(toleration.get("value")), _text(taint.get("value"))
    if operator == "Equal":
        return value == taint_value
    if operator == "Exists":
        return True
    if operator in ("Lt", "Gt"):
        mine, theirs = _int64(value), _int64(taint_value)
        if mine is None or theirs is None:
            return False
        return theirs < mine if operator == "Lt" else theirs > mine
    return False


def _text(value: Any) -> str:
    return "" if value is None else str(value)


#: A decimal integer as the API server validates Lt/Gt values (apimachinery
#: content.IsDecimalInteger): 0, or an optional minus and a first digit 1-9.
_DECIMAL_INTEGER = re.compile(r"0|-?[1-9][0-9]*")


def _int64(value: str) -> int | None:
    """``value`` as a 64-bit integer, or None where the scheduler's parse fails."""
    if _DECIMAL_INTEGER.fullmatch(value) is None:
        return None
    number = int(value)
    return number if -2**63 <= number < 2**63 else None
