"""The ProcMesh documents of a ``procmesh create -f`` file, checked before anything is created.

Pure: :mod:`.commands` reads the file and creates what :func:`procmeshes` returns. Every problem
is a :class:`ManifestError` whose message names the file and what is wrong with it, so the user
sees one ``error:`` line (as ``kubectl create -f``), never a YAML parser's traceback.
"""

from __future__ import annotations

from typing import Any

from mesh_client._src import contract


class ManifestError(ValueError):
    """A manifest that holds no ProcMesh to create, or one that cannot be created as it is."""


def source_name(filename: str) -> str:
    """How messages name the file: ``-`` is standard input."""
    return "<stdin>" if filename == "-" else filename


def procmeshes(text: str, filename: str) -> list[dict[str, Any]]:
    """The ProcMesh objects of a YAML or JSON text (several documents, or a ``kind: List``)."""
    import yaml

    where = source_name(filename)
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        detail = " ".join(str(exc).split())  # the parser's message and its line/column, on one line
        raise ManifestError(f"{where}: not valid YAML or JSON: {detail}") from None
    objects: list[Any] = []
    for doc in docs:
        if isinstance(doc, dict) and doc.get("kind") == "List" and isinstance(doc.get("items"), list):
            objects += doc["items"]
        else:
            objects.append(doc)
    if not objects:
        raise ManifestError(f"{where}: no objects passed to create (the file holds no YAML or JSON document)")
    for i, obj in enumerate(objects, 1):
        which = f"document {i}" if len(objects) > 1 else "the document"
        if not isinstance(obj, dict):
            raise ManifestError(f"{where}: {which} is a {_yaml_kind(obj)}, not an object: a ProcMesh "
                                f"manifest is a mapping with apiVersion, kind, metadata and spec")
        if obj.get("kind") != contract.KIND or obj.get("apiVersion") != contract.API_VERSION:
            raise ManifestError(
                f"{where}: a {obj.get('apiVersion')} {obj.get('kind')} is not a ProcMesh; procmesh create "
                f"takes {contract.API_VERSION} ProcMesh documents (kubectl apply the rest)")
        meta = obj.get("metadata")
        if not isinstance(meta, dict) or not (meta.get("name") or meta.get("generateName")):
            raise ManifestError(f"{where}: {which} has no metadata.name: give the ProcMesh a name "
                                f"(metadata: {{name: trainer}}) or a metadata.generateName prefix")
    return objects


def check_namespace(objects: list[dict[str, Any]], namespace: str | None, filename: str) -> None:
    """As ``kubectl create -n``: a namespace given on the command line that a document names
    another for is refused, since the user asked for that one (``None``: not given, so each
    document goes to its own namespace)."""
    for obj in objects:
        own = (obj.get("metadata") or {}).get("namespace")
        if namespace is not None and own not in (None, namespace):
            raise ManifestError(
                f"{source_name(filename)}: ProcMesh {display_name(obj)} is for namespace {own}, not "
                f"{namespace} (given by -n): pass -n {own}, or leave metadata.namespace out of the file")


def _yaml_kind(value: Any) -> str:
    if isinstance(value, list):
        return "list"
    if isinstance(value, str):
        return "plain string"
    return type(value).__name__


def display_name(obj: dict[str, Any]) -> str:
    """The name a message about ``obj`` gives it before the API server names it."""
    meta = obj.get("metadata") or {}
    return str(meta.get("name") or f"{meta.get('generateName')}*")
