#!/usr/bin/env bash
# Regenerates the committed reference outputs that `Cli.QuickstartMatchesItsGoldenOutputs` compares
# against (tests/golden/): run it after a change that is meant to change results, then review and
# commit the diff, and say in the commit which results changed and why.
#   scripts/update-golden.sh [BUILD_DIR]        (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$build/apps/placelab" run scenarios/quickstart.yaml -o "$out/quickstart" --quiet
mkdir -p tests/golden/quickstart
cp "$out/quickstart/summary.json" "$out/quickstart/report.md" tests/golden/quickstart/
git --no-pager diff --stat -- tests/golden
