#!/usr/bin/env bash
# Runs the whole test suite the way CI does: lint, then every test with the
# race detector, shuffled. Fuzz targets run their seed corpora as tests.
# PostgreSQL conformance tests run when BATON_TEST_POSTGRES_DSN is set
# (scripts/pg.sh starts a throwaway cluster).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/lint.sh
if [ -z "${BATON_TEST_POSTGRES_DSN:-}" ]; then
  echo "note: BATON_TEST_POSTGRES_DSN is not set; PostgreSQL tests will skip (see scripts/pg.sh)" >&2
fi
go test -race -shuffle=on -count=1 -timeout 20m "$@" ./...
# With PostgreSQL, the end-to-end suite runs again against clusters: each
# test server is three nodes behind a round-robin proxy (docs/cluster.md).
if [ -n "${BATON_TEST_POSTGRES_DSN:-}" ]; then
  echo "end-to-end suite against three-node clusters (BATON_TEST_CLUSTER_NODES=3)" >&2
  BATON_TEST_CLUSTER_NODES=3 go test -race -shuffle=on -count=1 -timeout 15m "$@" ./cmd/baton/
fi
