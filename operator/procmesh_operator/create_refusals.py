"""Pod creates the API server refused, said as the reason a user can act on.

A namespace's policies refuse proc pods at create: a ResourceQuota with no room left (a wait:
room frees as other pods end, or the quota is raised), one that counts requests the template
does not set, a LimitRange, Pod Security admission, another admission policy or webhook (each
needs a change to the mesh or to the namespace). The raw API text alone said none of that, and
"Scheduling" was read as the scheduler's wait. The operator goes on retrying with its backoff,
so the mesh is placed once the cause is gone, as a ReplicaSet's ``FailedCreate`` is.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from mesh_client._src import contract
from procmesh_operator import kubeclient

if TYPE_CHECKING:
    from procmesh_operator import claiming, planning


@dataclasses.dataclass(frozen=True)
class CreateRefusal:
    """Why the API server refused a proc pod, with what to do."""

    reason: str
    message: str

    @property
    def waits(self) -> bool:
        """Clears without a change to the mesh (quota room frees)."""
        return self.reason in contract.WAITING_REASONS


class CreatesFailed(Exception):
    """A pod create failed (``error``) after ``created`` were made: the first refusal stops
    the others, so a refused mesh costs one refused request per worker in flight, not one
    per pod; and the pods made before it are still told in the ``CreatedProcs`` event."""

    def __init__(self, pod: str, error: kubeclient.ApiError, created: list[str]) -> None:
        super().__init__(str(error))
        self.pod = pod
        self.error = error
        self.created = created
        # What the reconcile planned, for its status (set where the plan is known).
        self.plan: planning.Plan | None = None
        self.view: claiming.ClaimView | None = None


def classify(pod: str, error: kubeclient.ApiError) -> CreateRefusal | None:
    """The refusal in ``error`` (a 403 or 422 of an admission check or of the Pod API's
    validation), or None for what is no refusal (a 5xx, a timeout): that is a reconcile error."""
    if error.status not in (403, 422):
        return None
    text = error.message
    said = f"the API server refused proc pod {pod}: {text}"
    if "exceeded quota" in text:
        return CreateRefusal(contract.WAITING_FOR_QUOTA, (
            f"{said}; it is created once the namespace's ResourceQuota has room (pods of it end, "
            f"or the quota is raised), or lower spec.template.resources or the mesh's size"))
    if "violates PodSecurity" in text:
        return CreateRefusal(contract.POD_REFUSED, (
            f"{said}. Set what it names in spec.template.securityContext or "
            f"containerSecurityContext: the operator's defaults pass \"restricted\" with the "
            f"default image, and an image of your own needs securityContext.runAsNonRoot: true "
            f"and a user other than root; or run the mesh in a namespace whose "
            f"pod-security.kubernetes.io/enforce level allows it"))
    if "failed quota" in text and "must specify" in text:
        return CreateRefusal(contract.POD_REFUSED, (
            f"{said}. The namespace's ResourceQuota counts these resources, so every pod must "
            f"state them: set them in spec.template.resources (requests, and limits where named)"))
    if "per Container" in text or "per Pod" in text:
        return CreateRefusal(contract.POD_REFUSED, (
            f"{said}. A LimitRange of the namespace bounds each container: set "
            f"spec.template.resources within it"))
    return CreateRefusal(contract.POD_REFUSED, (
        f"{said}. An admission check of the namespace (a policy, a webhook, the operator's "
        f"RBAC) or the Pod API refuses the pod as the mesh renders it: change the mesh, or "
        f"the policy"))
