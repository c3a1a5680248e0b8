"""The few Kubernetes API calls the client makes, with refusals turned into errors that name the
missing permission. Wraps the official ``kubernetes`` client (imported only here).

Access is by mesh (README, "Access and threat model"): reading a mesh and its token is what the
mesh's Role ``<mesh>-procmesh-access`` grants, so a refusal there names that Role. The client
never needs to read any other Secret: for meshes it creates, it writes the token Secret itself.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Callable
from typing import Any, TypeVar

from mesh_client._src import contract
from mesh_client._src.kubernetes import grants, transport
from mesh_client._src.kubernetes.errors import (
    ApiServerUnreachable,
    KubernetesMeshError,
    MeshAccessDenied,
    MeshNotFound,
    MeshNotReady,
)
from mesh_client._src.runtime import exiting

T = TypeVar("T")


def token_secret_name(mesh: dict[str, Any]) -> str:
    """The token Secret of the ProcMesh body ``mesh`` (:func:`contract.token_secret_name`):
    ``spec.tokenSecretName``, else ``status.tokenSecretName`` (the operator's), else the legacy
    ``<mesh>-token`` of meshes made by older operators."""
    try:
        return contract.token_secret_name(
            mesh["metadata"]["name"], (mesh.get("spec") or {}).get("tokenSecretName"),
            (mesh.get("status") or {}).get(contract.TOKEN_SECRET_STATUS_FIELD))
    except ValueError as e:
        raise KubernetesMeshError(str(e)) from None


#: The ``name`` of a request that lists across namespaces, for its messages (not a mesh's name:
#: those are DNS labels).
ALL_NAMESPACES = "*"

SA_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


def _client_module() -> Any:
    try:
        import kubernetes
    except ImportError:  # pragma: no cover - depends on the extra
        raise ImportError("the Kubernetes backend needs the kubernetes extra: pip install 'procmesh[kubernetes]'") from None
    return kubernetes


def make_api_client(kubeconfig: str | None = None, context: str | None = None) -> Any:
    """In a pod: the service account. Elsewhere: the kubeconfig (KUBECONFIG or ~/.kube/config).
    Its requests are tried again as :func:`transport.retries` says; its connections are kept
    alive as :func:`transport.socket_options` says."""
    kubernetes = _client_module()
    config = kubernetes.client.Configuration()
    in_pod = kubeconfig is None and context is None and bool(os.environ.get("KUBERNETES_SERVICE_HOST")) \
        and os.path.exists(SA_NAMESPACE)
    if in_pod:
        kubernetes.config.load_incluster_config(client_configuration=config)
    else:
        kubernetes.config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=config)
    config.retries = transport.retries()
    config.socket_options = transport.socket_options()
    client = kubernetes.client.ApiClient(config)
    if in_pod:
        return client
    # The client removes the CA file it wrote from the kubeconfig at exit: not before our threads
    # in API calls have ended, or each new connection of theirs fails (runtime/exiting.py).
    cleanup = getattr(getattr(kubernetes.config, "kube_config", None), "_cleanup_temp_files", None)
    if cleanup is not None:
        exiting.after_threads(cleanup)
    return client


def pod_namespace() -> str | None:
    """The namespace of the pod this process runs in (its service account's), if any."""
    if not os.path.exists(SA_NAMESPACE):
        return None
    with open(SA_NAMESPACE) as f:
        return f.read().strip() or None


def default_namespace(kubeconfig: str | None = None, context: str | None = None) -> str:
    if os.path.exists(SA_NAMESPACE) and kubeconfig is None:
        with open(SA_NAMESPACE) as f:
            return f.read().strip()
    try:
        kubernetes = _client_module()
        _, active = kubernetes.config.list_kube_config_contexts(config_file=kubeconfig)
        if context is not None:
            contexts, _ = kubernetes.config.list_kube_config_contexts(config_file=kubeconfig)
            active = next((c for c in contexts if c["name"] == context), active)
        return (active.get("context") or {}).get("namespace") or "default"
    except Exception:
        return "default"


class KubeApi:
    """ProcMeshes, their pods and token Secrets in one namespace."""

    def __init__(self, api_client: Any, namespace: str) -> None:
        kubernetes = _client_module()
        self.namespace = namespace
        self.api_client = api_client
        self._exc = kubernetes.client.ApiException
        self.custom = kubernetes.client.CustomObjectsApi(api_client)
        self.core = kubernetes.client.CoreV1Api(api_client)
        self._sanitize: Callable[[Any], dict[str, Any]] = api_client.sanitize_for_serialization
        self.timeout = transport.api_timeout_from(os.environ)  # seconds a request waits (None: no limit)

    def _what(self, resource: str, name: str = "") -> str:
        if name == ALL_NAMESPACES:
            return f"{resource} in all namespaces"
        return f"{resource} {self.namespace}/{name}" if name else f"{resource} in namespace {self.namespace}"

    def _send(self, verb: str, resource: str, name: str, call: Callable[..., T], *args: Any,
              timeout: float | None = None, followed: bool = False, **kwargs: Any) -> T:
        """``call(*args, **kwargs)`` under the request timeout (a list's reads five times it, a
        followed log's :data:`transport.FOLLOW_READ_SECONDS`), its connect and each read at most
        ``timeout`` (what a wait with a deadline has left); :func:`transport.send` says what
        failed."""
        read_factor = 0.0 if followed else transport.LIST_TIMEOUT_FACTOR if verb == "list" else 1.0
        return transport.send(call, *args, host=str(getattr(self.api_client.configuration, "host", "")),
                              what=f"{verb} {self._what(resource, name)}", limit=self.timeout,
                              read_factor=read_factor, deadline=timeout, **kwargs)

    def _refused(self, exc: Any, verb: str, resource: str, name: str = "") -> KubernetesMeshError:
        what = self._what(resource, name)
        if exc.status == 504 and verb in ("create", "patch", "delete"):
            return ApiServerUnreachable(
                f"the API server timed out on a request to {verb} {what} ({exc.status} {exc.reason}): it may "
                f"or may not have been done; look before trying again ('procmesh get -n {self.namespace}')")
        if exc.status in (429, 503, 504):  # throttled or shutting down (GETs were tried again)
            return ApiServerUnreachable(
                f"the API server could not serve a request to {verb} {what} now: {exc.status} {exc.reason}: "
                f"{_message(exc)}")
        if exc.status == 403:
            return MeshAccessDenied(
                f"the API server refused to {verb} {what}: this client needs the '{verb}' permission on "
                f"{resource} in namespace {self.namespace} (the Helm chart's client role grants it: "
                f"rbac.clientRole.create=true, bound by rbac.clientRole.bindings to this client's user, group or "
                f"service account)"
            )
        if exc.status == 404 and resource == contract.PLURAL and (not name or not _names_object(exc, name)):
            return KubernetesMeshError(
                f"this cluster has no ProcMesh resource type (the CRD {contract.PLURAL}.{contract.GROUP} is not "
                f"installed): install procmesh (its Helm chart installs the CRD), or check the kubeconfig's cluster"
            )
        if exc.status == 404 and resource == contract.PLURAL:
            return MeshNotFound(
                f"ProcMesh {self.namespace}/{name} does not exist; 'kubectl get procmeshes -n {self.namespace}' "
                f"lists the meshes there (is the namespace right?)"
            )
        if exc.status == 404 and resource == "secrets":
            return MeshNotReady(f"the token Secret {self.namespace}/{name} does not exist yet; the operator creates it", "TokenNotCreated")
        return KubernetesMeshError(f"cannot {verb} {what}: {exc.status} {exc.reason}: {_message(exc)}")

    def _mesh_denied(self, mesh: str, verb: str, resource: str, name: str) -> MeshAccessDenied:
        role = contract.access_role_name(mesh)
        secret = f"its token Secret {name}" if resource == "secrets" else "its token Secret"
        return MeshAccessDenied(
            f"the API server refused to {verb} {resource} {self.namespace}/{name}: this client may not use "
            f"ProcMesh {self.namespace}/{mesh}. Access is granted per mesh by binding its Role {role}: "
            f"procmesh grant {mesh} -n {self.namespace} --user=<user> (or --group=<group>, "
            f"--serviceaccount=<namespace>:<name>) binds it for as long as this mesh exists (a plain "
            f"'kubectl create rolebinding --role={role}' outlives the mesh and grants the next mesh of "
            f"that name too). That Role grants 'get' and "
            f"'watch' on procmeshes {mesh} and 'get' on {secret}: whoever it is bound to can "
            f"run code in the mesh's procs, and nothing on other meshes. The operator creates it with "
            f"the mesh, so it exists only if ProcMesh {self.namespace}/{mesh} does"
        )

    def get_mesh(self, name: str, timeout: float | None = None) -> dict[str, Any]:
        one_object(name)
        try:
            body: dict[str, Any] = self._send("get", contract.PLURAL, name, self.custom.get_namespaced_custom_object,
                                              contract.GROUP, contract.VERSION, self.namespace, contract.PLURAL, name,
                                              timeout=timeout)
            return body
        except self._exc as exc:
            if exc.status == 403:
                raise self._mesh_denied(name, "get", contract.PLURAL, name) from None
            raise self._refused(exc, "get", contract.PLURAL, name) from None

    def list_meshes(self, all_namespaces: bool = False) -> list[dict[str, Any]]:
        """The ProcMeshes of this namespace (or of all), as the API returns them."""
        try:
            if all_namespaces:
                listed = self._send("list", contract.PLURAL, ALL_NAMESPACES, self.custom.list_cluster_custom_object,
                                    contract.GROUP, contract.VERSION, contract.PLURAL)
            else:
                listed = self._send("list", contract.PLURAL, "", self.custom.list_namespaced_custom_object,
                                    contract.GROUP, contract.VERSION, self.namespace, contract.PLURAL)
        except self._exc as exc:
            if exc.status == 403:
                where = "in any namespace" if all_namespaces else f"in namespace {self.namespace}"
                raise MeshAccessDenied(
                    f"the API server refused to list procmeshes {where}: listing takes 'list' on "
                    f"procmeshes.procmesh.io (the chart's client role grants it: rbac.clientRole.create=true, "
                    f"or bind the aggregated 'view' ClusterRole); a single mesh needs only its Role: "
                    f"'procmesh get MESH'"
                ) from None
            raise self._refused(exc, "list", contract.PLURAL) from None
        return list(listed.get("items") or [])

    def events(self, kind: str, name: str, uid: str | None = None) -> list[dict[str, Any]] | None:
        """Events about the object ``kind``/``name``, oldest first; None when not allowed to read
        them (they only add detail, but "no events" would be a claim). ``uid``: only this incarnation's, not those of an object
        of the same name deleted before (events outlive it by the API server's event TTL)."""
        selector = f"involvedObject.kind={kind},involvedObject.name={name}"
        if uid:
            selector += f",involvedObject.uid={uid}"
        try:
            items = self._send("list", "events", "", self.core.list_namespaced_event, self.namespace,
                               field_selector=selector).items
        except self._exc as exc:
            if exc.status == 403:
                return None
            raise self._refused(exc, "list", "events") from None
        events = [self._sanitize(e) for e in items]
        return sorted(events, key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "")

    def pod_log(self, pod: str, *, follow: bool = False, tail: int | None = None, previous: bool = False,
                timeout: float | None = None) -> Any:
        """A streaming response of ``pod``'s proc-server log (``.stream()`` yields chunks); its
        request and reads wait ``timeout`` seconds at most where given."""
        kwargs: dict[str, Any] = {"container": contract.CONTAINER_NAME, "follow": follow, "previous": previous,
                                  "_preload_content": False}
        if tail is not None:
            kwargs["tail_lines"] = tail
        try:
            return self._send("get", "pods/log", pod, self.core.read_namespaced_pod_log, pod, self.namespace,
                              timeout=timeout, followed=follow, **kwargs)
        except self._exc as exc:
            if exc.status == 403:
                raise MeshAccessDenied(
                    f"the API server refused to get pods/log of {self.namespace}/{pod}: reading a mesh's "
                    f"logs takes 'get' on pods/log in namespace {self.namespace} (the chart's client role "
                    f"grants it)"
                ) from None
            if previous and exc.status in (400, 404):
                raise KubernetesMeshError(
                    "no earlier run's log (--previous): a proc runs once in its pod (restartPolicy Never); "
                    "a restarted proc is a new pod of the same name, and its earlier run's log went with the "
                    "old pod. Without -p, the current run's log is shown (with -f, followed across restarts)"
                ) from None
            if exc.status == 404 and _not_found_kind(exc) == "pods":
                raise KubernetesMeshError(
                    f"pod {self.namespace}/{pod} does not exist, so its proc has no log now (its pod is not "
                    f"created yet, or was deleted): 'procmesh describe' shows the mesh's procs and why"
                ) from None
            raise self._refused(exc, "get", "pods/log", pod) from None

    def create_mesh(self, body: dict[str, Any]) -> dict[str, Any]:
        meta = body.get("metadata") or {}
        name = str(meta.get("name") or f"{meta.get('generateName')}*")  # generateName: named by the server
        try:
            created: dict[str, Any] = self._send("create", contract.PLURAL, name,
                                                 self.custom.create_namespaced_custom_object,
                                                 contract.GROUP, contract.VERSION, self.namespace, contract.PLURAL, body)
            return created
        except self._exc as exc:
            if exc.status == 422 or exc.status == 400:
                raise KubernetesMeshError(f"the API server refused ProcMesh {name}: {_message(exc)}") from None
            if exc.status == 409:
                raise KubernetesMeshError(
                    f"ProcMesh {self.namespace}/{name} already exists: use it (attach('{name}', "
                    f"'{self.namespace}') in Python), delete it first ('procmesh delete {name} -n "
                    f"{self.namespace} --wait'), or pick another name"
                ) from None
            if exc.status == 404 and _not_found_kind(exc) == "namespaces":
                raise KubernetesMeshError(
                    f"namespace {self.namespace} does not exist, so ProcMesh {name} cannot be created there: "
                    f"create the namespace first (kubectl create namespace {self.namespace}), or pick "
                    f"another (-n, or the manifest's metadata.namespace)"
                ) from None
            if exc.status == 404:  # the collection itself is missing: no such resource type
                raise self._refused(exc, "create", contract.PLURAL) from None
            raise self._refused(exc, "create", contract.PLURAL, name) from None

    def renew_lease(self, name: str, when: str, timeout: float | None = None, uid: str | None = None) -> None:
        """Write the lease renewal annotation of mesh ``name`` (see :mod:`.lifetimes`); with
        ``uid``, only of that mesh: one made since under its name is another's, left alone
        (:class:`MeshNotFound`, as for ours gone)."""
        metadata: dict[str, Any] = {"annotations": {contract.LEASE_RENEW_ANNOTATION: when}}
        if uid:
            metadata["uid"] = uid  # a precondition: for another object it is a change, refused (uid is immutable)
        one_object(name)
        try:
            self._send("patch", contract.PLURAL, name, self.custom.patch_namespaced_custom_object,
                       contract.GROUP, contract.VERSION, self.namespace, contract.PLURAL, name, {"metadata": metadata},
                       timeout=timeout)
        except self._exc as exc:
            if uid and exc.status == 422 and "metadata.uid" in _invalid_fields(exc):
                raise MeshNotFound(self._replaced(name, uid)) from None
            raise self._refused(exc, "patch", contract.PLURAL, name) from None

    def delete_mesh(self, name: str, timeout: float | None = None, uid: str | None = None) -> None:
        """Delete mesh ``name`` (gone already is fine), its connect and read within ``timeout``;
        with ``uid``, only that mesh: a client deleting what it made must not delete a mesh made
        since under the same name by someone else (taken as gone: there is nothing of ours)."""
        one_object(name)
        options: dict[str, Any] = {"propagationPolicy": "Background"}
        if uid:
            options["preconditions"] = {"uid": uid}
        try:
            self._send("delete", contract.PLURAL, name, self.custom.delete_namespaced_custom_object,
                       contract.GROUP, contract.VERSION, self.namespace, contract.PLURAL, name,
                       body=options, timeout=timeout)
        except self._exc as exc:
            if exc.status == 404 or (uid and exc.status == 409):
                return
            raise self._refused(exc, "delete", contract.PLURAL, name) from None

    def _replaced(self, name: str, uid: str) -> str:
        return (f"ProcMesh {self.namespace}/{name} (uid {uid}) was deleted, and the mesh of that name now is "
                f"another one, made since")

    def read_token(self, mesh: str, secret: str) -> bytes:
        """The token of ``mesh`` from its Secret (what the mesh's access Role lets one get)."""
        try:
            obj = self._send("get", "secrets", secret, self.core.read_namespaced_secret, secret, self.namespace)
        except self._exc as exc:
            if exc.status == 403:
                raise self._mesh_denied(mesh, "get", "secrets", secret) from None
            raise self._refused(exc, "get", "secrets", secret) from None
        data = (obj.data or {}).get(contract.TOKEN_KEY)
        if not data:
            raise KubernetesMeshError(f"Secret {self.namespace}/{secret} has no '{contract.TOKEN_KEY}' key")
        return base64.b64decode(data).strip()

    def create_token_secret(self, mesh: dict[str, Any], token: bytes) -> None:
        """Create the token Secret of a mesh this client just created, owned by that mesh (so
        garbage collection deletes it with the mesh). Create only: this client never reads
        Secrets, and a Secret of that name that already exists is someone else's: refused."""
        meta = mesh["metadata"]
        name = token_secret_name(mesh)
        body = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": name,
                "labels": {contract.MESH_LABEL: meta["name"]},
                "ownerReferences": [contract.owner_reference(meta["name"], meta["uid"])],
            },
            "type": "Opaque",
            "data": {contract.TOKEN_KEY: base64.b64encode(token).decode()},
        }
        try:
            self._send("create", "secrets", name, self.core.create_namespaced_secret, self.namespace, body)
        except self._exc as exc:
            if exc.status == 409:
                raise KubernetesMeshError(
                    f"Secret {self.namespace}/{name} already exists, so it is not this mesh's: someone created it "
                    f"first (its token is theirs); spawn the mesh again, it picks a new Secret name"
                ) from None
            raise self._refused(exc, "create", "secrets", name) from None

    def create_grant(self, mesh: dict[str, Any], binding: dict[str, Any]) -> bool:
        """Create ``binding`` (:func:`.grants.render`); False if this mesh's binding of that
        name is there already. One left by an earlier mesh of the same name is refused: garbage
        collection is about to delete it."""
        name = binding["metadata"]["name"]
        rbac = _client_module().client.RbacAuthorizationV1Api(self.api_client)
        try:
            self._send("create", "rolebindings", name, rbac.create_namespaced_role_binding, self.namespace, binding)
            return True
        except self._exc as exc:
            if exc.status == 403:
                raise MeshAccessDenied(
                    f"the API server refused to create rolebindings {self.namespace}/{name}: {_message(exc)}. "
                    f"Granting a mesh takes 'create' on rolebindings in namespace {self.namespace}, and either "
                    f"the rights of Role {binding['roleRef']['name']} (to get the mesh and its token Secret) "
                    f"or 'bind' on it: a namespace admin has both") from None
            if exc.status != 409:
                raise self._refused(exc, "create", "rolebindings", name) from None
        try:
            found = self._send("get", "rolebindings", name, rbac.read_namespaced_role_binding, name, self.namespace)
        except self._exc as exc:
            raise self._refused(exc, "get", "rolebindings", name) from None
        if grants.owned_by(self._sanitize(found), mesh):
            return False
        raise KubernetesMeshError(
            f"RoleBinding {self.namespace}/{name} exists but is not owned by this ProcMesh (uid "
            f"{mesh['metadata']['uid']}): an earlier mesh of that name left it and garbage collection has "
            f"not deleted it yet; run this again in a moment")

    def pods(self, mesh: str) -> list[dict[str, Any]]:
        return self.visible_pods(mesh) or []

    def visible_pods(self, mesh: str, timeout: float | None = None) -> list[dict[str, Any]] | None:
        """The mesh's pods, or None when this client may not list pods (they are only for
        better messages and for checking the status against them; the status suffices)."""
        def listed(**request: Any) -> list[dict[str, Any]]:
            # The JSON as it comes, not the client's typed models: building and re-serialising
            # those costs about 1 ms a pod, paid at every poll of attach's wait for Ready. Read
            # here, so that a body cut short is the request's failure too.
            response = self.core.list_namespaced_pod(self.namespace, label_selector=contract.mesh_label_selector(mesh),
                                                     _preload_content=False, **request)
            items: list[dict[str, Any]] = json.loads(response.data).get("items") or []
            return items

        try:
            return self._send("list", "pods", "", listed, timeout=timeout)
        except self._exc as exc:
            if exc.status == 403:
                return None
            raise self._refused(exc, "list", "pods") from None

    def all_mesh_pods(self, all_namespaces: bool = False) -> list[dict[str, Any]] | None:
        """Every mesh's pods in this namespace (or all, one list call), or None when not allowed."""
        try:
            if all_namespaces:
                items = self._send("list", "pods", ALL_NAMESPACES, self.core.list_pod_for_all_namespaces,
                                   label_selector=contract.MESH_LABEL).items
            else:
                items = self._send("list", "pods", "", self.core.list_namespaced_pod, self.namespace,
                                   label_selector=contract.MESH_LABEL).items
        except self._exc as exc:
            if exc.status == 403:
                return None
            raise self._refused(exc, "list", "pods") from None
        return [self._sanitize(p) for p in items]

    def pod(self, name: str, timeout: float | None = None) -> dict[str, Any] | None:
        try:
            return self._sanitize(self._send("get", "pods", name, self.core.read_namespaced_pod, name, self.namespace,
                                             timeout=timeout))
        except self._exc as exc:
            if exc.status == 404:
                return None
            if exc.status == 403:
                return {}
            raise self._refused(exc, "get", "pods", name) from None


def _not_found_kind(exc: Any) -> str | None:
    """What a 404 says was not found (``details.kind``: "namespaces" for a missing namespace);
    None when the body says nothing (no such path: a resource type that is not served)."""
    try:
        kind = (json.loads(exc.body).get("details") or {}).get("kind")
    except Exception:
        return None
    return str(kind) if kind else None


def _invalid_fields(exc: Any) -> set[str]:
    """The fields a 422 refused (``details.causes[].field``)."""
    try:
        causes = (json.loads(exc.body).get("details") or {}).get("causes") or []
        return {str(cause.get("field")) for cause in causes if isinstance(cause, dict)}
    except Exception:
        return set()


def _names_object(exc: Any, name: str) -> bool:
    """Whether a 404 says that object ``name`` is missing (a Status naming it), rather than the
    resource type itself (a path the API server does not serve answers a bare 404 page)."""
    import json

    try:
        details = json.loads(exc.body).get("details") or {}
    except Exception:
        return False
    return bool(details.get("name") == name)


def one_object(name: str) -> None:
    """Refuse a name that is no object's: the request path ``.../procmeshes/<name>`` of an empty
    name is the collection's, and a DELETE there deletes every mesh of the namespace."""
    if not contract.is_object_name(name):
        raise ValueError(f"{name!r} is not the name of a ProcMesh (a name is not empty, and has no '/')")


def _message(exc: Any) -> str:
    import json

    try:
        return str(json.loads(exc.body).get("message", exc.body))
    except Exception:
        return str(exc.body or exc.reason)
