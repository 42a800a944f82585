#!/usr/bin/env bash
# make bench: measure dal against its baselines on this machine.
set -euo pipefail
cd "$(dirname "$0")/.."
go run ./bench/cmd/dal-bench "$@"
