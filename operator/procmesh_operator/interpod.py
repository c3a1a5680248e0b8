"""The kube-scheduler's required inter-pod (anti-)affinity, on one node, for the gang fit check.

Pure. :func:`procmesh_operator.fitting.fit` asks :func:`why_not` for each node it tries, with the
pods already on that node (bound ones and those it placed a moment ago) and every pod placed
anywhere; so the gate mode of :mod:`.ganging` does not release a gang whose hosts cannot get
distinct nodes (:mod:`.spreading`), which the scheduler would then leave half bound.

Simulated as the scheduler's InterPodAffinity filter does, for terms whose topologyKey is
``kubernetes.io/hostname`` (a node is its own domain); terms on other keys (zones) are not
simulated and stay the scheduler's to judge:

* each required anti-affinity term of the incoming pod fails on a node holding a matching pod,
  and so does an existing pod's term that matches the incoming pod (anti-affinity is symmetric);
* each required affinity term needs a matching pod on the node, unless no pod anywhere matches
  and the incoming pod matches the term itself (the first of a group goes anywhere).

Namespaces: a term's ``namespaces`` list, else the pod's own namespace; a ``namespaceSelector``
is read as "any namespace" (the check has no namespace labels).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from procmesh_operator import names

HOSTNAME_TOPOLOGY_KEY = names.HOSTNAME_LABEL
_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


def _requirement(expr: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key = str(expr.get("key"))
    values = [str(v) for v in expr.get("values") or []]
    op = expr.get("operator")
    if op == "In":
        return key in labels and labels[key] in values
    if op == "NotIn":
        return key not in labels or labels[key] not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    return False


def selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """A metav1.LabelSelector against ``labels``; a missing selector matches nothing, as in
    an affinity term."""
    if selector is None:
        return False
    if any(labels.get(str(k)) != str(v) for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    return all(_requirement(e, labels) for e in selector.get("matchExpressions") or [])


def _meta(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    return pod.get("metadata") or {}


def _term_matches(term: Mapping[str, Any], owner: Mapping[str, Any],
                  other: Mapping[str, Any]) -> bool:
    """Whether ``other`` is a pod that ``owner``'s term ``term`` selects."""
    namespace = str(_meta(other).get("namespace") or "default")
    if term.get("namespaceSelector") is None:
        allowed = term.get("namespaces") or [str(_meta(owner).get("namespace") or "default")]
        if namespace not in allowed:
            return False
    return selector_matches(term.get("labelSelector"), _meta(other).get("labels") or {})


def _terms(pod: Mapping[str, Any], kind: str) -> list[Mapping[str, Any]]:
    section = (((pod.get("spec") or {}).get("affinity") or {}).get(kind) or {})
    return [t for t in section.get(_REQUIRED) or [] if t.get("topologyKey") == HOSTNAME_TOPOLOGY_KEY]


def _name(pod: Mapping[str, Any]) -> str:
    return str(_meta(pod).get("name", "?"))


class Placed:
    """Every pod placed anywhere, indexed by label, so that finding the pods a term selects
    costs a lookup, not a scan of the cluster (a 2000-proc gang asks once per proc)."""

    def __init__(self, pods: Iterable[tuple[Mapping[str, Any], str]] = ()) -> None:
        self._all: list[Mapping[str, Any]] = []
        self._by_label: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
        self._node: dict[int, str] = {}  # id(pod) -> its node
        for pod, node in pods:
            self.add(pod, node)

    def add(self, pod: Mapping[str, Any], node: str) -> None:
        self._all.append(pod)
        self._node[id(pod)] = node
        for key, value in (_meta(pod).get("labels") or {}).items():
            self._by_label.setdefault((str(key), str(value)), []).append(pod)

    def node_of(self, pod: Mapping[str, Any]) -> str:
        return self._node[id(pod)]

    def candidates(self, term: Mapping[str, Any]) -> list[Mapping[str, Any]]:
        """A superset of the pods ``term`` selects: those with its rarest required label."""
        selector = term.get("labelSelector") or {}
        pairs = [(str(k), str(v)) for k, v in (selector.get("matchLabels") or {}).items()]
        pairs += [(str(e.get("key")), str(e["values"][0]))
                  for e in selector.get("matchExpressions") or []
                  if e.get("operator") == "In" and len(e.get("values") or []) == 1]
        if not pairs:
            return self._all
        return min((self._by_label.get(pair, []) for pair in pairs), key=len)


def affinity_nodes(pod: Mapping[str, Any], placed: Placed) -> set[str] | None:
    """The nodes where every required affinity term of ``pod`` finds a pod: only these can
    take it. None when any node can (no terms, or :func:`first_of_group`)."""
    affinity = _terms(pod, "podAffinity")
    if not affinity or first_of_group(pod, placed):
        return None
    out: set[str] | None = None
    for term in affinity:
        nodes = {placed.node_of(p) for p in placed.candidates(term) if _term_matches(term, pod, p)}
        out = nodes if out is None else out & nodes
    return out or set()


def first_of_group(pod: Mapping[str, Any], placed: Placed) -> bool:
    """Whether ``pod`` may ignore its required affinity terms: it matches them itself and no
    pod ``placed`` anywhere matches any of them (the scheduler's rule for a group's first pod).
    The same on every node, so :mod:`.fitting` asks once per pod."""
    affinity = _terms(pod, "podAffinity")
    if not affinity or not all(_term_matches(t, pod, pod) for t in affinity):
        return False
    return not any(_term_matches(t, pod, p) for t in affinity for p in placed.candidates(t))


def why_not(pod: Mapping[str, Any], here: Sequence[Mapping[str, Any]],
            first: bool) -> str | None:
    """None if ``pod``'s required inter-pod terms (and those of the pods ``here``, on the node)
    allow it on this node, else the reason in the scheduler's words. ``first``: what
    :func:`first_of_group` says of ``pod``."""
    for term in _terms(pod, "podAntiAffinity"):
        clash = next((p for p in here if _term_matches(term, pod, p)), None)
        if clash is not None:
            return f"node(s) didn't match pod anti-affinity rules (pod {_name(clash)} is there)"
    for other in here:
        if any(_term_matches(t, other, pod) for t in _terms(other, "podAntiAffinity")):
            return (f"node(s) didn't satisfy existing pods anti-affinity rules (pod "
                    f"{_name(other)} is there)")
    affinity = _terms(pod, "podAffinity")
    if affinity and not first and not all(any(_term_matches(t, pod, p) for p in here)
                                          for t in affinity):
        return "node(s) didn't match pod affinity rules"
    return None
