#!/usr/bin/env bash
# The e2e suite on a kind cluster: the same images and the same checks as CI's real node.
#
# Creates a kind cluster, builds our images with the suite's own builder (`python -m tests.cluster
# images`: buildah, no daemon needed, cached by input hash), loads their archives into kind, and
# runs tests/e2e against that cluster (PROCMESH_E2E_KUBECONFIG), leaving out the tests that need the
# harness's own node (marker harness_node: its network namespace and containerd). Run by hand
# before a release; CI runs the same module on its real node (scripts/test).
#
# Needs: kind with Docker or Podman (KIND_EXPERIMENTAL_PROVIDER=podman), kubectl, root for buildah
# and debootstrap (Debian packages `buildah debootstrap`), an environment with procmesh installed
# (scripts/setup; PROCMESH_VENV, default .venv), and helm built by tests/cluster/build.sh.
#   tests/e2e/kind/run.sh                 # cluster procmesh-e2e, deleted at the end
#   KEEP_CLUSTER=1 tests/e2e/kind/run.sh  # keep it (the next run reuses it)
# Extra arguments go to pytest (for example -k cpu_example).
set -euo pipefail
cd "$(dirname "$0")/../../.."
CLUSTER="${CLUSTER:-procmesh-e2e}"
VENV="${PROCMESH_VENV:-.venv}"

for tool in kind kubectl buildah debootstrap; do
  command -v "$tool" >/dev/null || { echo "e2e: $tool is not on PATH" >&2; exit 2; }
done
[ -x "$VENV/bin/python" ] || { echo "e2e: no environment at $VENV: run scripts/setup" >&2; exit 2; }

KUBECONFIG_FILE="$(mktemp -t procmesh-kind-kubeconfig.XXXXXX)"
cleanup() {
  rm -f "$KUBECONFIG_FILE"
  if [ "${KEEP_CLUSTER:-0}" != 1 ]; then kind delete cluster --name "$CLUSTER"; fi
}
trap cleanup EXIT

echo "== kind cluster $CLUSTER"
kind get clusters | grep -qx "$CLUSTER" || kind create cluster --name "$CLUSTER" --wait 120s
kind get kubeconfig --name "$CLUSTER" > "$KUBECONFIG_FILE"

echo "== images (the suite's build; archives loaded into kind)"
"$VENV/bin/python" -m tests.cluster images --archives | tee /dev/stderr | while read -r kind_ name ref file; do
  [ "$kind_" = archive ] || continue
  [ "$name" = pause ] && continue   # kind's nodes bring their own sandbox image
  echo "loading $name ($ref)"
  kind load image-archive --name "$CLUSTER" "$file"
done

echo "== tests/e2e on kind"
PROCMESH_E2E_KUBECONFIG="$KUBECONFIG_FILE" "$VENV/bin/python" -m pytest tests/e2e \
  -m "e2e and not harness_node" "$@"
echo "e2e on kind: passed"
