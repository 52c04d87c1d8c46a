#!/usr/bin/env bash
# Runs every benchmark once with memory stats. BENCH selects (default .),
# BENCHTIME sets -benchtime (default 1s). Pipe two runs into benchstat to compare.
set -euo pipefail
cd "$(dirname "$0")/.."
go test -run '^$' -bench "${BENCH:-.}" -benchmem -benchtime "${BENCHTIME:-1s}" ./...
