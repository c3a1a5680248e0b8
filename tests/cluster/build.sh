#!/usr/bin/env bash
# Build or reuse the test cluster's binaries (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, helm) into ~/.cache/procmesh/bin/<hash of the pins>/. CI calls this before the
# integration tests. PYTHON may name the interpreter (default: python3).
set -euo pipefail
cd "$(dirname "$0")/../.."
# KWOK (scale runs only): `build.sh --kwok` builds it alone, into a cache folder of its own
# (tests/cluster/kwok/build.py); the scale tests and benchmarks build it on demand.
if [ "${1:-}" = "--kwok" ]; then
  shift
  exec "${PYTHON:-python3}" -m tests.cluster.kwok.build "$@"
fi
exec "${PYTHON:-python3}" -m tests.cluster.build "$@"
