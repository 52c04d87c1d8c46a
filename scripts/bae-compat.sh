#!/usr/bin/env bash
# bae-compat.sh runs BAE's own TypeScript SDK and its reference-assistant
# example, unchanged, against Baton (TestBAETypeScriptSDK in cmd/baton).
#
#   scripts/bae-compat.sh [go test flags]
#
# It clones or updates github.com/prettysmartdev/better-agent-engine into
# .cache/bae (ignored by git), then runs
#
#   BATON_BAE_REPO=.cache/bae go test -run TestBAETypeScriptSDK -v ./cmd/baton
#
# Where BAE comes from, first match wins:
#   $BATON_BAE_URL                 any git URL or path
#   $BATON_BAE_MIRROR              a local (bare) git mirror, if it exists;
#                                  default /work/.mirror/prettysmartdev+better-agent-engine/repo
#   https://github.com/prettysmartdev/better-agent-engine
# $BATON_BAE_REF picks the revision (default HEAD).
#
# Exit status: 0 when the test passed, 1 when it failed, 2 when BAE could
# not be fetched or node/npm are missing (nothing was tested).
set -euo pipefail
cd "$(dirname "$0")/.."

die() {
	echo "bae-compat: $*" >&2
	exit 2
}

for tool in git node npm go; do
	command -v "$tool" >/dev/null 2>&1 || die "$tool is not on PATH"
done

mirror=${BATON_BAE_MIRROR:-/work/.mirror/prettysmartdev+better-agent-engine/repo}
if [[ -n ${BATON_BAE_URL:-} ]]; then
	src=$BATON_BAE_URL
elif [[ -d $mirror ]]; then
	src=file://$(cd "$mirror" && pwd)
else
	src=https://github.com/prettysmartdev/better-agent-engine
fi
ref=${BATON_BAE_REF:-HEAD}
dest=.cache/bae

mkdir -p .cache
[[ -f .cache/.gitignore ]] || echo '*' >.cache/.gitignore

fetch() {
	# No prompts for credentials, and give up on a dead network.
	GIT_TERMINAL_PROMPT=0 timeout 60 git "$@"
}

echo "bae-compat: fetching $ref from $src" >&2
if [[ ! -d $dest/.git ]]; then
	rm -rf "$dest"
	git init -q "$dest"
fi
fetch -C "$dest" fetch -q --depth 1 "$src" "$ref" ||
	die "cannot fetch BAE ($ref) from $src; set BATON_BAE_URL or BATON_BAE_MIRROR, or check the network"
git -C "$dest" checkout -q --force --detach FETCH_HEAD
git -C "$dest" clean -q -fdx
[[ -f $dest/client-typescript/package-lock.json ]] ||
	die "$src at $ref has no client-typescript/package-lock.json"
echo "bae-compat: testing against BAE $(git -C "$dest" rev-parse --short HEAD)" >&2

BATON_BAE_REPO=$PWD/$dest go test -count=1 -run '^TestBAETypeScriptSDK$' -v "$@" ./cmd/baton || exit 1
