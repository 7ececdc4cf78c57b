#!/usr/bin/env bash
# Runs the fuzz targets of a PLACELAB_FUZZ build one after another, each for SECONDS on its corpus.
#   fuzz/run.sh BUILD_DIR SECONDS [TARGET...]     (TARGET: graph_json, trace, ...; default all)
# Each target's working corpus is BUILD_DIR/corpus/<target>: seeded from the repository's files
# (scenarios/, scenarios/graphs/, hwmodels/presets/, tests/data/, fuzz/seeds/) and kept between
# runs, so a later run starts where the last one stopped. Logs go to BUILD_DIR/fuzz-logs/, crash
# inputs to BUILD_DIR/fuzz-crashes/. Exits non-zero when a target finds anything. FUZZ_CPU=N pins
# the runs to core N (taskset), FUZZ_FLAGS adds libFuzzer flags (-runs=N stops a target after N
# inputs). TMPDIR defaults to /dev/shm where it is writable.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:?usage: fuzz/run.sh BUILD_DIR SECONDS [TARGET...]}
seconds=${2:?usage: fuzz/run.sh BUILD_DIR SECONDS [TARGET...]}
shift 2
all=(graph_json placement_json machine_yaml calibration_yaml scenario_yaml trace onnx api cli)
targets=("$@")
((${#targets[@]})) || targets=("${all[@]}")

seeds() {  # the repository's files that seed a target's corpus
  case $1 in
    graph_json) echo scenarios/graphs/*.json fuzz/seeds/graph_json/* ;;
    placement_json) echo fuzz/seeds/placement_json/* ;;
    machine_yaml) echo hwmodels/presets/*.yaml ;;
    calibration_yaml) echo fuzz/seeds/calibration_yaml/* ;;
    scenario_yaml) echo scenarios/*.yaml ;;
    trace) echo fuzz/seeds/trace/* ;;
    onnx) echo tests/data/onnx/*.onnx ;;
    api) echo fuzz/seeds/api/* ;;
    cli) echo fuzz/seeds/cli/* ;;
    *) echo "fuzz/run.sh: unknown target $1 (targets: ${all[*]})" >&2; exit 2 ;;
  esac
}

pin=()
[[ -n ${FUZZ_CPU:-} ]] && pin=(taskset -c "$FUZZ_CPU")
# scenario_yaml_fuzz writes each input to a file in the temporary folder: on tmpfs that costs
# nothing, on ext4 rewriting a file forces its writeback on close (a fifth of the speed).
if [[ -z ${TMPDIR:-} && -d /dev/shm && -w /dev/shm ]]; then export TMPDIR=/dev/shm; fi
mkdir -p "$build/fuzz-logs" "$build/fuzz-crashes"
status=0
for t in "${targets[@]}"; do
  exe=$build/fuzz/${t}_fuzz
  [[ -x $exe ]] || { echo "fuzz/run.sh: $exe not built (make fuzz builds it)" >&2; exit 2; }
  corpus=$build/corpus/$t
  mkdir -p "$corpus"
  for f in $(seeds "$t"); do cp -n "$f" "$corpus/" ; done
  dict=()
  [[ -f fuzz/dicts/$t.dict ]] && dict=(-dict="fuzz/dicts/$t.dict")
  log=$build/fuzz-logs/$t-$(date +%Y%m%d-%H%M%S).log
  echo "== $t: ${seconds}s on $(ls "$corpus" | wc -l) corpus files (log: $log)"
  # -timeout: one input running 10 s is a finding (a hang); -rss_limit_mb: so is 2 GB of memory.
  if "${pin[@]}" "$exe" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
       -artifact_prefix="$build/fuzz-crashes/$t-" "${dict[@]}" ${FUZZ_FLAGS:-} "$corpus" > "$log" 2>&1; then
    grep -aE '^(#[0-9]+[[:space:]]+DONE|Done [0-9]+ runs)' "$log" | tail -2
    grep -aE '^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)' "$log"
  else
    status=1
    echo "== $t: FOUND something; the input is in $build/fuzz-crashes/, the report:"
    grep -aE -A30 'ERROR: |placelab fuzz:|runtime error' "$log" | head -60
  fi
done
exit $status
