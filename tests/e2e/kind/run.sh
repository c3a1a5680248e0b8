#!/usr/bin/env bash
# End to end on a real cluster: create a kind cluster, build and load both images, install the
# chart, apply the CPU example mesh and wait until it is Ready, then uninstall.
#
# Needs Docker (or Podman with KIND_EXPERIMENTAL_PROVIDER=podman), kind, kubectl and helm on PATH.
# CI does NOT run this script (no container engine there); the chart is tested in CI against the
# local control plane by tests/integration/helm. Run it by hand before a release:
#   tests/e2e/kind/run.sh              # cluster procmesh-e2e, deleted at the end
#   KEEP_CLUSTER=1 tests/e2e/kind/run.sh
# Env: CLUSTER (procmesh-e2e), TAG (the chart's appVersion), PROC_SERVER_BASE (a CPU base by
# default, so the test does not pull CUDA images), KEEP_CLUSTER.
set -euo pipefail
cd "$(dirname "$0")/../../.."
CLUSTER="${CLUSTER:-procmesh-e2e}"
TAG="${TAG:-$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' charts/procmesh-operator/Chart.yaml)}"
PROC_SERVER_BASE="${PROC_SERVER_BASE:-python:3.12-slim-bookworm}"
NS=procmesh-system
CONTEXT="kind-$CLUSTER"

for tool in docker kind kubectl helm; do
  command -v "$tool" >/dev/null || { echo "e2e: $tool is not on PATH" >&2; exit 2; }
done

cleanup() {
  if [ "${KEEP_CLUSTER:-0}" != 1 ]; then kind delete cluster --name "$CLUSTER"; fi
}
trap cleanup EXIT

echo "== kind cluster $CLUSTER"
kind get clusters | grep -qx "$CLUSTER" || kind create cluster --name "$CLUSTER" --wait 120s

echo "== images (tag $TAG)"
docker build -f operator/Dockerfile -t "procmesh/operator:$TAG" .
# A CPU base without torch is enough for the CPU example; the default BASE carries CUDA torch.
docker build -f images/proc-server/Dockerfile --build-arg "BASE=$PROC_SERVER_BASE" \
  -t "procmesh/proc-server:$TAG" .
kind load docker-image --name "$CLUSTER" "procmesh/operator:$TAG" "procmesh/proc-server:$TAG"

echo "== helm install"
helm upgrade --install procmesh charts/procmesh-operator --kube-context "$CONTEXT" \
  -n "$NS" --create-namespace --wait --timeout 180s \
  --set image.pullPolicy=Never
kubectl --context "$CONTEXT" -n "$NS" rollout status deploy/procmesh-procmesh-operator

echo "== examples"
kubectl --context "$CONTEXT" apply -f examples/meshes/cpu-mesh.yaml
kubectl --context "$CONTEXT" wait --for=condition=Ready --timeout=300s procmesh/cpu-mesh
kubectl --context "$CONTEXT" get procmesh cpu-mesh -o wide
kubectl --context "$CONTEXT" delete -f examples/meshes/cpu-mesh.yaml --wait=true

echo "== uninstall (the CRD stays: crds.keep)"
helm uninstall procmesh --kube-context "$CONTEXT" -n "$NS" --wait
kubectl --context "$CONTEXT" get crd procmeshes.procmesh.io
echo "e2e: passed"
