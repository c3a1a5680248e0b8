"""dra mode: the memory budget of each device slot (one request of one claim), before pods exist.

The scheduler picks the device, but every pod that references the same (claim, request) gets the
same device, so the operator knows who will share it: the live proc pods of any mesh that name
that slot, plus the ranks about to be created. Their fractions plus a CUDA context each must fit
the device (:mod:`.budgets`); the device's memory is its published ``memory`` capacity once the
claim is allocated, else ``settings.default_gpu_memory_mib``. Called by :mod:`.placing`; pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from mesh_client._src import contract
from procmesh_operator import budgets, claims, placing, rendering, specs
from procmesh_operator import settings as settings_

Slot = tuple[str, str]  # (claim name, request name)


def slot_uses(pods: Iterable[Mapping[str, Any]]) -> dict[Slot, list[budgets.DeviceUse]]:
    """The proc pods that hold their device (:func:`placing.holds_device`) by the slot their
    container references."""
    out: dict[Slot, list[budgets.DeviceUse]] = {}
    for pod in pods:
        slot = claims.pod_slot(pod)
        if slot is None or not placing.holds_device(pod):
            continue
        meta = pod.get("metadata") or {}
        raw = (meta.get("annotations") or {}).get(contract.MEMORY_FRACTION_ANNOTATION)
        out.setdefault(slot, []).append(
            budgets.DeviceUse(str(meta.get("name")), float(raw) if raw is not None else None))
    return out


def place(mesh: specs.MeshSpec, ranks: Sequence[int], *,
          own_pods: Mapping[int, Mapping[str, Any]],
          other_pods: Iterable[Mapping[str, Any]],
          slot_memory: Mapping[Slot, int],
          settings: settings_.Settings) -> placing.Placement:
    """Placements (the scheduler's choice: no node, no device) for ``ranks``, or a refusal
    naming the slot whose device would overflow. ``other_pods``: proc pods of other meshes in
    the namespace; ``slot_memory``: MiB of the devices allocated so far, by slot."""
    uses = slot_uses([*other_pods, *(p for p in own_pods.values() if placing.is_live(p))])
    wanted: dict[Slot, list[budgets.DeviceUse]] = {}
    for rank in ranks:
        wanted.setdefault(claims.slot_of(mesh, rank), []).append(
            budgets.DeviceUse(contract.pod_name(mesh.name, rank), mesh.gpus.memory_fraction))
    staying = placing.staying_meshes(mesh)
    refusals: list[placing.Refusal] = []
    for slot, new in sorted(wanted.items()):
        together = list(uses.get(slot, [])) + new
        memory = slot_memory.get(slot) or settings.default_gpu_memory_mib
        if budgets.overflow_mib(together, memory, settings.cuda_context_mib) > 0:
            refusals.append(placing.Refusal(
                budgets.overrun_reason(together, memory, settings.cuda_context_mib, staying),
                budgets.explain_overrun(f"{slot[0]}/{slot[1]}", "(chosen by the scheduler)",
                                        together, memory, settings.cuda_context_mib, staying)))
    if refusals:
        # A slot that no wait clears first (devices differ in memory): room freeing on another
        # would not place the mesh.
        return placing.Placement(refusal=min(refusals, key=lambda r: r.waits))
    return placing.Placement(procs={rank: rendering.ProcPlacement() for rank in ranks})
