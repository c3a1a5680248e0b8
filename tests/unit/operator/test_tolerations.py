"""How one toleration meets one taint (tolerations.tolerates), as v1.36's scheduler judges it."""

import pytest

from procmesh_operator import fitting, tolerations

TAINT_5 = {"key": "gpu-gen", "value": "5", "effect": "NoSchedule"}


def numeric(operator, value, **extra):
    return {"key": "gpu-gen", "operator": operator, "value": value, **extra}


@pytest.mark.parametrize("toleration,taint,tolerated", [
    # Equal (the default) and Exists; empty key and effect match every key and effect.
    ({"key": "gpu-gen", "value": "5"}, TAINT_5, True),
    ({"key": "gpu-gen", "operator": "Equal", "value": "6"}, TAINT_5, False),
    ({"key": "gpu-gen", "operator": "Exists"}, TAINT_5, True),
    ({"key": "other", "operator": "Exists"}, TAINT_5, False),
    ({"operator": "Exists"}, TAINT_5, True),
    ({"key": "gpu-gen", "operator": "Exists", "effect": "NoExecute"}, TAINT_5, False),
    # Lt: the taint's value is less than the toleration's; Gt: greater (as int64).
    (numeric("Lt", "6"), TAINT_5, True),
    (numeric("Lt", "5"), TAINT_5, False),  # equal values: not tolerated (was: tolerated)
    (numeric("Lt", "4"), TAINT_5, False),
    (numeric("Gt", "4"), TAINT_5, True),
    (numeric("Gt", "5"), TAINT_5, False),
    (numeric("Gt", "6"), TAINT_5, False),
    (numeric("Gt", "-1"), {**TAINT_5, "value": "0"}, True),
    (numeric("Lt", "-3"), {**TAINT_5, "value": "-4"}, True),
    (numeric("Lt", "10"), {**TAINT_5, "value": "9"}, True),  # numbers, not strings
    (numeric("Gt", "0"), {**TAINT_5, "value": str(2**63 - 1)}, True),
    (numeric("Lt", "0"), {**TAINT_5, "value": str(-2**63)}, True),
    (numeric("Lt", "6", effect="NoSchedule"), TAINT_5, True),
    (numeric("Lt", "6", effect="NoExecute"), TAINT_5, False),
    (numeric("Lt", "6", key="other"), TAINT_5, False),
    # A value that is not a plain decimal int64, on either side, matches nothing.
    *[(numeric(op, bad), TAINT_5, False) for op in ("Lt", "Gt")
      for bad in ("", "06", "+6", "-0", "6.0", " 6", "6\n", "1e3", "0x6", "\u0666",
                  str(2**63), str(-2**63 - 1))],
    *[(numeric(op, "0"), {**TAINT_5, "value": bad}, False) for op in ("Lt", "Gt")
      for bad in ("05", "+5", "five", str(2**63))],
    (numeric("Lt", "6"), {"key": "gpu-gen", "effect": "NoSchedule"}, False),  # no value
    # Operators the API knows no more of (case counts) match nothing.
    (numeric("lt", "6"), TAINT_5, False),
    ({"key": "gpu-gen", "operator": "In", "value": "5"}, TAINT_5, False),
])
def test_tolerates_judges_each_operator_as_the_scheduler_does(toleration, taint, tolerated):
    assert tolerations.tolerates(toleration, taint) is tolerated
    assert (fitting.untolerated([toleration], [taint]) is None) is tolerated  # placement asks here
