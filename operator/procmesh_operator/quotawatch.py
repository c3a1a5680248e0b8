"""The operator's watch of ResourceQuotas, so a mesh waiting for quota room is placed when the
room comes rather than at its next retry.

A mesh refused for a full quota (``WaitingForQuota``, :mod:`.create_refusals`) was looked at
again only when the reconcile queue's backoff ran out, up to 30 s after the quota was raised or
the pods holding it ended. The quota controller writes each quota's ``status.used`` as pods come
and go, and a raised limit is a change of its own: either is an event here, which reconciles the
meshes waiting in that namespace. Only the namespace of each quota is kept. Started with the pod
watch, over the same namespaces (:mod:`.listwatch`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from procmesh_operator import kubeclient, listwatch

QuotaEvent = Callable[[str | None, dict[str, Any]], None]


def path(namespace: str | None) -> str:
    """Where quotas are listed: in ``namespace``, or every namespace (None)."""
    if namespace is None:
        return "/api/v1/resourcequotas"
    return kubeclient.core_path(namespace, "resourcequotas")


def slim_quota(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What the controller reads of a quota: its name and namespace."""
    meta = obj.get("metadata") or {}
    return {"metadata": {k: meta[k] for k in ("name", "namespace", "resourceVersion") if k in meta}}


def start(client: kubeclient.KubeClient, namespace: str | None, event: QuotaEvent) -> listwatch.ListWatch:
    """A running watch of every quota in ``namespace`` (None: every namespace)."""
    watch = listwatch.ListWatch(client, path(namespace), "", slim_quota, event)
    watch.start()
    return watch
