"""A container's environment, resolved as the kubelet resolves it.

Pure functions of the pod, its addresses and a ``lookup`` for Secrets and ConfigMaps: ``envFrom``
then ``env`` (values with ``$(VAR)`` expansion, ``fieldRef``, ``resourceFieldRef``,
``secretKeyRef``, ``configMapKeyRef``). Also :func:`field_value` and :func:`resource_value`,
shared with downward-API volumes in :mod:`.volumes`. Used by :mod:`.pods`.
"""

from __future__ import annotations

import base64
import math
import re
from collections.abc import Callable
from decimal import Decimal
from typing import Any

Obj = dict[str, Any]
#: ``lookup(kind, namespace, name)`` with kind ``secrets`` or ``configmaps``: the object or None.
Lookup = Callable[[str, str, str], "Obj | None"]


class ConfigError(ValueError):
    """The container cannot be configured (the kubelet's CreateContainerConfigError)."""


_SUFFIXES: dict[str, Decimal | int] = {
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
    "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": 1,
    "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
}


def quantity(text: str) -> Decimal:
    """A resource quantity (``500m``, ``2Gi``, ``1e3``) as a number."""
    match = re.fullmatch(r"([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)([a-zA-Z]*)", str(text).strip())
    if not match or match.group(2) not in _SUFFIXES:
        raise ConfigError(f"bad quantity {text!r}")
    return Decimal(match.group(1)) * Decimal(_SUFFIXES[match.group(2)])


def field_value(pod: Obj, path: str, pod_ip: str, host_ip: str) -> str:
    """The downward-API value of ``path`` (a fieldRef.fieldPath)."""
    meta, spec = pod["metadata"], pod["spec"]
    keyed = re.fullmatch(r"metadata\.(labels|annotations)\['(.+)'\]", path)
    if keyed:
        return str((meta.get(keyed.group(1)) or {}).get(keyed.group(2), ""))
    if path in ("metadata.labels", "metadata.annotations"):
        items = meta.get(path.split(".")[1]) or {}
        return "\n".join(f'{k}="{v}"' for k, v in sorted(items.items()))
    simple = {
        "metadata.name": meta["name"], "metadata.namespace": meta["namespace"],
        "metadata.uid": meta["uid"], "spec.nodeName": spec.get("nodeName", ""),
        "spec.serviceAccountName": spec.get("serviceAccountName", ""),
        "status.podIP": pod_ip, "status.podIPs": pod_ip,
        "status.hostIP": host_ip, "status.hostIPs": host_ip,
    }
    if path not in simple:
        raise ConfigError(f"unsupported fieldRef {path!r}")
    return str(simple[path])


def resource_value(pod: Obj, container_name: str, ref: Obj, allocatable: dict[str, str]) -> str:
    """The downward-API value of a resourceFieldRef (limits fall back to node allocatable)."""
    container = next((c for c in pod["spec"]["containers"] if c["name"] == (ref.get("containerName") or container_name)), None)
    if container is None:
        raise ConfigError(f"resourceFieldRef names unknown container {ref.get('containerName')!r}")
    kind, _, resource = ref["resource"].partition(".")
    given = (container.get("resources") or {}).get(kind, {}).get(resource)
    if given is None and kind == "limits":
        given = allocatable.get(resource, "0")
    value = quantity(given or "0") / quantity(str(ref.get("divisor") or "1"))
    return str(math.ceil(value))


def expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes ``$(VAR)`` expansion: defined names are replaced, ``$$`` escapes a ``$``."""

    def replace(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group(1)
        return env[name] if name in env else match.group(0)

    return re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)", replace, text)


def decoded(obj: Obj, key: str) -> bytes | None:
    """The bytes of ``key`` in a Secret or ConfigMap (``data`` or ``binaryData``)."""
    if obj.get("kind") == "Secret" or "type" in obj:
        raw = (obj.get("data") or {}).get(key)
        return None if raw is None else base64.b64decode(raw)
    if key in (obj.get("data") or {}):
        return str(obj["data"][key]).encode()
    raw = (obj.get("binaryData") or {}).get(key)
    return None if raw is None else base64.b64decode(raw)


def keys(obj: Obj) -> list[str]:
    """Every key of a Secret or ConfigMap."""
    return sorted({*(obj.get("data") or {}), *(obj.get("binaryData") or {})})


def _key_ref(ref: Obj, kind: str, namespace: str, lookup: Lookup) -> str | None:
    obj = lookup(kind, namespace, ref["name"])
    value = None if obj is None else decoded(obj, ref["key"])
    if value is None:
        if ref.get("optional"):
            return None
        what = "secret" if kind == "secrets" else "configmap"
        raise ConfigError(f"{what} {ref['name']!r} or its key {ref['key']!r} not found")
    return value.decode(errors="replace")


def container_env(pod: Obj, container: Obj, *, pod_ip: str, host_ip: str, lookup: Lookup,
                  allocatable: dict[str, str], base: dict[str, str] | None = None) -> dict[str, str]:
    """The env the pod declares for ``container`` (``envFrom`` then ``env``), over ``base``."""
    namespace = pod["metadata"]["namespace"]
    env = dict(base or {})
    for source in container.get("envFrom") or []:
        prefix = source.get("prefix", "")
        for kind, field in (("secrets", "secretRef"), ("configmaps", "configMapRef")):
            if field not in source:
                continue
            obj = lookup(kind, namespace, source[field]["name"])
            if obj is None:
                if source[field].get("optional"):
                    continue
                raise ConfigError(f"{kind[:-1]} {source[field]['name']!r} not found")
            for key in keys(obj):
                raw = decoded(obj, key)
                if raw is not None:
                    env[prefix + key] = raw.decode(errors="replace")
    for var in container.get("env") or []:
        name = var["name"]
        source = var.get("valueFrom")
        if source is None:
            env[name] = expand(var.get("value", ""), env)
        elif "fieldRef" in source:
            env[name] = field_value(pod, source["fieldRef"]["fieldPath"], pod_ip, host_ip)
        elif "resourceFieldRef" in source:
            env[name] = resource_value(pod, container["name"], source["resourceFieldRef"], allocatable)
        elif "secretKeyRef" in source:
            value = _key_ref(source["secretKeyRef"], "secrets", namespace, lookup)
            if value is not None:
                env[name] = value
        elif "configMapKeyRef" in source:
            value = _key_ref(source["configMapKeyRef"], "configmaps", namespace, lookup)
            if value is not None:
                env[name] = value
        else:
            raise ConfigError(f"env {name!r}: unsupported valueFrom {sorted(source)}")
    return env
