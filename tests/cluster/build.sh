#!/usr/bin/env bash
# Build or reuse the test cluster's binaries (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, helm) into ~/.cache/procmesh/bin/<hash of the pins>/. CI calls this before the
# integration tests. PYTHON may name the interpreter (default: python3).
set -euo pipefail
cd "$(dirname "$0")/../.."
exec "${PYTHON:-python3}" -m tests.cluster.build "$@"
