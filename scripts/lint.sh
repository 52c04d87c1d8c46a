#!/usr/bin/env bash
# gofmt, go vet and staticcheck must be clean.
set -euo pipefail
cd "$(dirname "$0")/.."
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt needed:" >&2
  echo "$unformatted" >&2
  exit 1
fi
go vet ./...
# staticcheck, pinned; fetched through the Go module proxy on first use.
go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
