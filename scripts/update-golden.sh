#!/usr/bin/env bash
# Regenerates the committed reference outputs (tests/golden/<name>/summary.json and report.md) that
# cli_test compares fresh runs with: `Cli.QuickstartMatchesItsGoldenOutputs` (the quickstart, learners
# and all) and `ReproducedTables/GoldenTable.*` (one scenario per table of docs/reproductions.md,
# seed 1, `--baselines-only`). Run it after a change that is meant to change results, then review
# and commit the diff, and say in the commit which results changed and why.
#   scripts/update-golden.sh [BUILD_DIR]        (default: build; about a minute)
# The exact baseline's solve time, the one host-dependent figure in these outputs, is masked as the
# test masks it (mask_host_figures in tests/apps/cli_run_test.cpp).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
# The same list, in the same order, as GoldenTable's INSTANTIATE_TEST_SUITE_P.
tables=(
  eagle-table1-inception-scotch
  eagle-table2-inception-before
  eagle-table4-bert
  post-table1-resnet50-2gpu
  spotlight-table1-rnnlm-4gpu
  spotlight-cifar10-4gpu
  exact-rnnlm2-2gpu
  pytorch-transformer-h100x8
)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
golden() {  # golden NAME [placelab run options...]
  local name=$1
  shift
  "$build/apps/placelab" run "scenarios/$name.yaml" -o "$out/$name" --quiet "$@"
  mkdir -p "tests/golden/$name"
  for f in summary.json report.md; do
    sed -E 's/( constraints, )[0-9]+\.[0-9] s/\1<masked> s/g' "$out/$name/$f" >"tests/golden/$name/$f"
  done
}
golden quickstart
for name in "${tables[@]}"; do golden "$name" --seeds 1 --baselines-only; done
git --no-pager diff --stat -- tests/golden
git status --short -- tests/golden
