#!/usr/bin/env bash
# The Kubernetes bridge under load (see tests/src/bin/kube_bench.rs): pods
# bound per second for 1000 single pods and 100 PodGroups of 8, and the time
# from a pod's creation to its binding with 1000 batch jobs pending. Prints
# one line per case. Extra arguments go to kube_bench (--pods N --groups N
# --latency N --pending N).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --workspace --bins
exec target/release/kube_bench "$@"
