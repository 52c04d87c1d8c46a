#!/usr/bin/env bash
# Runs every fuzz target for FUZZTIME (default 20s) each, one at a time (-fuzz
# takes one target per run, so each is selected with an anchored name), goes
# on past a failing target, and ends with a summary: the number of targets,
# the total time and the targets that failed. A failing input is kept under
# the package's testdata/fuzz/<target>/; commit it with the fix so the seed
# run of `go test` replays it. Exits non-zero when any target failed.
set -uo pipefail
cd "$(dirname "$0")/.."
fuzztime="${FUZZTIME:-20s}"
start=$SECONDS
count=0
failed=()
for pkg in $(go list ./...); do
  targets=$(go test -list '^Fuzz' "$pkg" | grep '^Fuzz') || continue
  for target in $targets; do
    echo "== $pkg $target"
    count=$((count + 1))
    if ! go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg"; then
      failed+=("$pkg $target")
    fi
  done
done
echo "== $count targets, ${fuzztime} each, $((SECONDS - start))s in all, ${#failed[@]} failed"
for f in "${failed[@]}"; do
  echo "FAIL $f"
done
[ "${#failed[@]}" -eq 0 ]
