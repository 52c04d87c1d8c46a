#!/usr/bin/env bash
# Runs every fuzz target for FUZZTIME (default 20s) each.
set -euo pipefail
cd "$(dirname "$0")/.."
for pkg in $(go list ./...); do
  for target in $(go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
    echo "== $pkg $target"
    go test -run '^$' -fuzz "^${target}\$" -fuzztime "${FUZZTIME:-20s}" "$pkg"
  done
done
