"""Which pod fields the process node cannot honour, so they are reported instead of ignored.

:func:`unsupported` is a pure function of the pod: it lists field paths with a short reason. The
pod still runs (what is unsupported is not applied); :mod:`.pods` posts a Warning event and sets
``status.reason=UnsupportedFields`` with the list in ``status.message``. Fields that only matter
to the scheduler, to image pulling or to accounting (resources other than the GPU) are not listed:
those work, or have no meaning without images.
"""

from __future__ import annotations

from typing import Any

REASON = "UnsupportedFields"

#: Volume sources :mod:`.volumes` materializes.
VOLUME_KINDS = ("secret", "configMap", "emptyDir", "downwardAPI", "projected", "hostPath")
#: Projected sources :mod:`.volumes` materializes.
PROJECTED_KINDS = ("secret", "configMap", "downwardAPI", "serviceAccountToken")
PROBE_KINDS = ("exec", "httpGet", "tcpSocket")


def _truthy_pod_fields(spec: dict[str, Any]) -> list[str]:
    found = []
    for field in ("hostPID", "hostIPC", "shareProcessNamespace"):
        if spec.get(field):
            found.append(f"spec.{field}: processes share the host's namespaces anyway")
    for field in ("ephemeralContainers", "hostAliases",
                  "runtimeClassName", "activeDeadlineSeconds"):
        if spec.get(field) not in (None, [], {}):
            found.append(f"spec.{field}: not implemented by the process node")
    if spec.get("hostUsers") is False:
        found.append("spec.hostUsers: user namespaces are not implemented by the process node")
    if spec.get("securityContext"):
        found.append("spec.securityContext: processes run as the node's user, unconfined")
    if (spec.get("dnsConfig") or {}) or spec.get("dnsPolicy") == "None":
        found.append("spec.dnsConfig: processes use the host's resolver")
    return found


def _container_fields(index: int, container: dict[str, Any], kind: str = "containers") -> list[str]:
    where = f"spec.{kind}[{index}]"
    found = []
    if container.get("securityContext"):
        found.append(f"{where}.securityContext: processes run as the node's user, unconfined")
    if container.get("lifecycle"):
        found.append(f"{where}.lifecycle: hooks are not run")
    for field in ("stdin", "tty"):
        if container.get(field):
            found.append(f"{where}.{field}: no terminal or stdin is attached")
    if container.get("volumeDevices"):
        found.append(f"{where}.volumeDevices: block devices are not supported")
    if container.get("restartPolicy"):
        found.append(f"{where}.restartPolicy: per-container restart policies (sidecars) are not supported")
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        spec = container.get(probe)
        if spec and not any(k in spec for k in PROBE_KINDS):
            found.append(f"{where}.{probe}: only exec, httpGet and tcpSocket probes are supported")
    for j, mount in enumerate(container.get("volumeMounts") or []):
        if mount.get("mountPropagation") not in (None, "None"):
            found.append(f"{where}.volumeMounts[{j}].mountPropagation: mounts are private")
        if mount.get("subPathExpr"):
            found.append(f"{where}.volumeMounts[{j}].subPathExpr: not implemented")
    return found


def _volume_fields(spec: dict[str, Any]) -> list[str]:
    found = []
    for i, volume in enumerate(spec.get("volumes") or []):
        kinds = [k for k in volume if k != "name"]
        for kind in kinds:
            if kind not in VOLUME_KINDS:
                found.append(f"spec.volumes[{i}].{kind}: this volume type is not supported")
            elif kind == "projected":
                for j, source in enumerate(volume["projected"].get("sources") or []):
                    for sub in source:
                        if sub not in PROJECTED_KINDS:
                            found.append(f"spec.volumes[{i}].projected.sources[{j}].{sub}: not supported")
    return found


def unsupported(pod: dict[str, Any]) -> list[str]:
    """Field paths of ``pod`` the process node does not apply, each with why."""
    spec = pod.get("spec") or {}
    found = _truthy_pod_fields(spec) + _volume_fields(spec)
    for i, container in enumerate(spec.get("initContainers") or []):
        found += _container_fields(i, container, "initContainers")
    for i, container in enumerate(spec.get("containers") or []):
        found += _container_fields(i, container)
    return found
