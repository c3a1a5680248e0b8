"""Pod creates the API server refused, said as the reason a user can act on.

A namespace's policies refuse proc pods at create: a ResourceQuota with no room left (a wait:
room frees as other pods end, or the quota is raised; unless its limit is below one pod's
request or the whole mesh's, which no freed room fixes), one that counts requests the template
does not set, a LimitRange, Pod Security admission, another admission policy or webhook (each
needs a change to the mesh or to the namespace). The raw API text alone said none of that, and
"Scheduling" was read as the scheduler's wait. The operator goes on retrying with its backoff,
so the mesh is placed once the cause is gone, as a ReplicaSet's ``FailedCreate`` is.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from mesh_client._src import contract
from procmesh_operator import fitting, kubeclient

if TYPE_CHECKING:
    from procmesh_operator import claiming, planning


@dataclasses.dataclass(frozen=True)
class CreateRefusal:
    """Why the API server refused a proc pod, with what to do."""

    reason: str
    message: str
    #: A ResourceQuota refused it: a change of the namespace's quotas may clear it (quotawatch.py).
    quota: bool = False

    @property
    def waits(self) -> bool:
        """Clears without a change to the mesh (quota room frees)."""
        return self.reason in contract.WAITING_REASONS


class CreatesFailed(Exception):
    """A pod create failed (``error``: the API server's answer, no answer, or a pod of that
    name that is not the mesh's) after ``created`` were made, which the ``CreatedProcs``
    event still names. A failed request stops the reconcile's other creates (the first pod
    is created alone, so a namespace that refuses every pod costs one request per retry)."""

    def __init__(self, pod: str, error: Exception, created: list[str]) -> None:
        super().__init__(str(error))
        self.pod = pod
        self.error = error
        self.created = created
        # What the reconcile planned, for its status (set where the plan is known).
        self.plan: planning.Plan | None = None
        self.view: claiming.ClaimView | None = None


def classify(pod: str, error: Exception, procs: int = 1) -> CreateRefusal | None:
    """The refusal in ``error`` (a 403 or 422 of an admission check or of the Pod API's
    validation), or None for what is no refusal (a 5xx, a timeout, a conflict, a namespace
    being deleted): that is a reconcile error. ``procs``: the mesh's size, whose pods a quota
    must hold all at once for the mesh to be Ready."""
    if not isinstance(error, kubeclient.ApiError) or error.status not in (403, 422):
        return None
    text = error.message
    said = f"the API server refused proc pod {pod} ({error.status} {error.reason}): {text}"
    if "is being terminated" in text:  # the namespace goes, and the mesh with it
        return None
    if "status unknown for quota" in text:  # a new quota, not counted yet: seconds
        return CreateRefusal(contract.WAITING_FOR_QUOTA, (
            f"{said}; it is created once the quota controller has counted the namespace's usage"), quota=True)
    if "exceeded quota" in text:
        over = beyond_limit(text)
        if over:
            return CreateRefusal(contract.POD_REFUSED, (
                f"{said}. One proc pod asks for more {', '.join(over)} than the namespace's "
                f"whole ResourceQuota allows, so no room that frees will fit it: lower "
                f"spec.template.resources, or raise the quota"), quota=True)
        whole = beyond_limit(text, procs)
        if whole:  # each pod fits, the mesh never will: a wait would be for ever
            return CreateRefusal(contract.POD_REFUSED, (
                f"{said}. The mesh's {procs} proc pods together ask for more "
                f"{', '.join(whole)} than the namespace's whole ResourceQuota allows, so it "
                f"can never be Ready as it stands: lower spec.template.resources or the mesh's "
                f"size, or raise the quota"), quota=True)
        return CreateRefusal(contract.WAITING_FOR_QUOTA, (
            f"{said}; it is created once the namespace's ResourceQuota has room (pods of it end, "
            f"or the quota is raised), or lower spec.template.resources or the mesh's size"), quota=True)
    if "violates PodSecurity" in text:
        return CreateRefusal(contract.POD_REFUSED, (
            f"{said}. Set what it names in spec.template.securityContext or "
            f"containerSecurityContext: the operator's defaults pass \"restricted\" with the "
            f"default image (unless it runs as root: operator.procServerImage.runsAsRoot), and an "
            f"image of your own needs securityContext.runAsNonRoot: true "
            f"and a user other than root; or run the mesh in a namespace whose "
            f"pod-security.kubernetes.io/enforce level allows it"))
    if "failed quota" in text and "must specify" in text:
        return CreateRefusal(contract.POD_REFUSED, (
            f"{said}. The namespace's ResourceQuota counts these resources, so every pod must "
            f"state them: set them in spec.template.resources (requests, and limits where named)"), quota=True)
    if "cannot create resource" in text:  # RBAC: the operator's own rights
        return CreateRefusal(contract.POD_REFUSED, (
            f"{said}. The operator's service account may not create pods in this namespace: "
            f"grant it (the chart's RBAC covers the namespaces it watches), or run the mesh "
            f"where the operator may"))
    if "per Container" in text or "per Pod" in text:
        return CreateRefusal(contract.POD_REFUSED, (
            f"{said}. A LimitRange of the namespace bounds each container: set "
            f"spec.template.resources within it"))
    return CreateRefusal(contract.POD_REFUSED, (
        f"{said}. An admission check of the namespace (a policy, a webhook) or the Pod API "
        f"refuses the pod as the mesh renders it: change the mesh, or the policy"))


def beyond_limit(text: str, pods: int = 1) -> list[str]:
    """The resources of an "exceeded quota" refusal for which ``pods`` pods like the refused
    one ask more than the quota's limit (``requested: pods=1,requests.cpu=8, used: ...,
    limited: requests.cpu=4``)."""
    requested = _amounts(text, "requested: ")
    limited = _amounts(text, "limited: ")
    over = []
    for name, amount in requested.items():
        limit = limited.get(name)
        if amount is not None and limit is not None and amount * pods > limit:
            over.append(name)
    return over


def _amounts(text: str, label: str) -> dict[str, int | None]:
    """``name=quantity`` pairs after ``label``, up to the next ``, word:`` (None: unparsed)."""
    start = text.find(label)
    if start < 0:
        return {}
    rest = text[start + len(label):]
    end = rest.find(": ")
    if end >= 0:  # the next label ("used: ") ends this list; drop its word
        rest = rest[:end].rsplit(",", 1)[0]
    out: dict[str, int | None] = {}
    for pair in rest.split(","):
        name, _, quantity = pair.strip().partition("=")
        if name and quantity:
            out[name] = _quantity(quantity.strip())
    return out


def _quantity(text: str) -> int | None:
    """A quantity of the API server's text (:func:`fitting.quantity`); None if it is none."""
    try:
        return fitting.quantity(text)
    except (ValueError, ArithmeticError):
        return None
