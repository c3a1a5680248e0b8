"""A pod's volumes, written as files under the pod's folder, and the mounts of each container.

:func:`materialize` fills ``<pod folder>/volumes/<name>/`` for secret, configMap, emptyDir,
downwardAPI and projected volumes (with service-account tokens from TokenRequest) and names host
folders for hostPath. :func:`mounts` turns a container's ``volumeMounts`` into bind mounts that
:mod:`.sandbox` applies inside the container's private mount namespace. Used by :mod:`.pods`.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.cluster.process_node import environment

Obj = dict[str, Any]
#: ``token(audience or None, expiration_seconds)``: a token bound to the pod.
TokenSource = Callable[["str | None", int], str]


@dataclasses.dataclass(frozen=True)
class Mount:
    """One bind mount: ``source`` on the host at ``target`` inside the container."""

    source: str
    target: str
    read_only: bool


def _write(folder: Path, relative: str, data: bytes, mode: int | None) -> None:
    path = folder / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    path.chmod(mode if mode is not None else 0o644)


def _key_files(folder: Path, obj: Obj | None, source: Obj, default_mode: int | None, what: str) -> None:
    """Write a Secret's or ConfigMap's keys (all, or ``items``) into ``folder``."""
    if obj is None:
        if source.get("optional"):
            return
        raise environment.ConfigError(f"{what} {source.get('name') or source.get('secretName')!r} not found")
    items = source.get("items") or [{"key": k, "path": k} for k in environment.keys(obj)]
    for item in items:
        data = environment.decoded(obj, item["key"])
        if data is None:
            if source.get("optional"):
                continue
            raise environment.ConfigError(f"{what} has no key {item['key']!r}")
        _write(folder, item["path"], data, item.get("mode", default_mode))


def _downward_files(folder: Path, pod: Obj, items: list[Obj], default_mode: int | None, *,
                    pod_ip: str, host_ip: str, allocatable: dict[str, str]) -> None:
    for item in items:
        if "fieldRef" in item:
            value = environment.field_value(pod, item["fieldRef"]["fieldPath"], pod_ip, host_ip)
        else:
            first = pod["spec"]["containers"][0]["name"]
            value = environment.resource_value(pod, first, item["resourceFieldRef"], allocatable)
        _write(folder, item["path"], value.encode(), item.get("mode", default_mode))


def materialize(pod: Obj, pod_dir: Path, *, lookup: environment.Lookup, token: TokenSource,
                pod_ip: str, host_ip: str, allocatable: dict[str, str]) -> dict[str, Path]:
    """Write every volume of ``pod``; returns the host folder of each volume by name."""
    namespace = pod["metadata"]["namespace"]
    found: dict[str, Path] = {}
    for volume in pod["spec"].get("volumes") or []:
        name = volume["name"]
        if "hostPath" in volume:
            host = Path(volume["hostPath"]["path"])
            if volume["hostPath"].get("type") in ("DirectoryOrCreate",) and not host.exists():
                host.mkdir(parents=True)
            found[name] = host
            continue
        folder = pod_dir / "volumes" / name
        if folder.exists() and "emptyDir" not in volume:
            shutil.rmtree(folder)  # refreshed on every (re)start; emptyDir keeps its contents
        folder.mkdir(parents=True, exist_ok=True)
        found[name] = folder
        if "secret" in volume:
            source = volume["secret"]
            _key_files(folder, lookup("secrets", namespace, source["secretName"]), source,
                       source.get("defaultMode"), f"secret {source['secretName']!r}")
        elif "configMap" in volume:
            source = volume["configMap"]
            _key_files(folder, lookup("configmaps", namespace, source["name"]), source,
                       source.get("defaultMode"), f"configmap {source['name']!r}")
        elif "downwardAPI" in volume:
            source = volume["downwardAPI"]
            _downward_files(folder, pod, source.get("items") or [], source.get("defaultMode"),
                            pod_ip=pod_ip, host_ip=host_ip, allocatable=allocatable)
        elif "projected" in volume:
            mode = volume["projected"].get("defaultMode")
            for source in volume["projected"].get("sources") or []:
                if "secret" in source:
                    ref = source["secret"]
                    _key_files(folder, lookup("secrets", namespace, ref["name"]), ref, mode,
                               f"secret {ref['name']!r}")
                elif "configMap" in source:
                    ref = source["configMap"]
                    _key_files(folder, lookup("configmaps", namespace, ref["name"]), ref, mode,
                               f"configmap {ref['name']!r}")
                elif "downwardAPI" in source:
                    _downward_files(folder, pod, source["downwardAPI"].get("items") or [], mode,
                                    pod_ip=pod_ip, host_ip=host_ip, allocatable=allocatable)
                elif "serviceAccountToken" in source:
                    ref = source["serviceAccountToken"]
                    value = token(ref.get("audience"), int(ref.get("expirationSeconds") or 3600))
                    _write(folder, ref["path"], value.encode(), mode if mode is not None else 0o600)
    return found


def mounts(container: Obj, volumes: dict[str, Path]) -> list[Mount]:
    """The bind mounts for ``container``'s volumeMounts (subPath included)."""
    found = []
    for mount in container.get("volumeMounts") or []:
        source = volumes.get(mount["name"])
        if source is None:
            raise environment.ConfigError(f"volumeMount {mount['name']!r} names no volume")
        if mount.get("subPath"):
            source = source / mount["subPath"]
            if not source.exists():
                source.mkdir(parents=True)
        found.append(Mount(str(source), os.path.normpath(mount["mountPath"]), bool(mount.get("readOnly"))))
    return found
