#!/usr/bin/env bash
# The hostile inputs of docs/reliability.md ("Every hostile input of the issue, end to end"), tried
# against a built CLI: each is made in a temporary folder, run under /usr/bin/time, and printed as
# a Markdown table row with its exit status, the line of its message that names what it must (else
# the first), the wall time and the maximum resident memory. A row fails (and the script exits 1)
# when the status is not the expected one (2 for bad input; 0 where placelab takes the input and
# says what it did), when the message lacks what it must name (the file, and the line where there
# is one), or when the command takes over 2 s or 1 GB — the bounds the issue set.
#   scripts/hostile-inputs.sh [PLACELAB]        (default: build/apps/placelab)
# HOSTILE_WALL_LIMIT_S replaces the 2-s bound: CTest runs this script (test hostile_inputs) with 30 s,
# a hang's bound, beside other tests; the table's times are those of a run by hand.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
P=$(realpath "${1:-$repo/build/apps/placelab}")
wall_limit=${HOSTILE_WALL_LIMIT_S:-2}
[[ -x $P ]] || { echo "hostile-inputs.sh: $P is not an executable (make build first)" >&2; exit 2; }
# 77: CTest's skip status (SKIP_RETURN_CODE); scripts/install-deps.sh installs both.
command -v python3 > /dev/null || { echo "hostile-inputs.sh: skipped: needs python3" >&2; exit 77; }
[[ -x /usr/bin/time ]] || { echo "hostile-inputs.sh: skipped: needs /usr/bin/time (Debian package time)" >&2; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 2
failed=0

# try LOADER INPUT EXPECTED_STATUS PATTERN COMMAND...: PATTERN (an extended regex, or empty) must
# match the command's stderr or stdout.
try() {
  local loader=$1 input=$2 want=$3 pattern=$4
  shift 4
  /usr/bin/time -f "%e %M" -o time.txt "$@" > out.txt 2> err.txt
  local status=$?
  local wall rss
  read -r wall rss < <(tail -n 1 time.txt)
  local message  # the line that shows the pattern, else the first line of stderr or stdout
  if [[ -n $pattern ]]; then message=$(cat err.txt out.txt | grep -m 1 -E -- "$pattern"); fi
  [[ -n ${message:-} ]] || message=$(grep -m 1 -v '^[[:space:]]*$' err.txt || grep -m 1 -v '^[[:space:]]*$' out.txt)
  message=${message//|/\\|}
  message=${message//\`/\'}
  message=${message//$work\//}
  ((${#message} > 150)) && message="${message:0:150}…"
  local verdict=""
  [[ $status == "$want" ]] || verdict="**FAILED: exit $status, not $want** "
  if [[ -n $pattern ]] && ! grep -qE -- "$pattern" err.txt out.txt; then verdict+="**FAILED: no /$pattern/** "; fi
  awk -v w="$wall" -v l="$wall_limit" -v r="$rss" 'BEGIN { exit !(w <= l && r <= 1048576) }' ||
    verdict+="**FAILED: over $wall_limit s or 1 GB** "
  [[ -z $verdict ]] || failed=1
  printf '| %s | %s | %s | %s`%s` | %.2f | %d |\n' "$loader" "$input" "$status" "$verdict" "$message" "$wall" $((rss / 1024))
}

py() { python3 -c "$@"; }

# --- inputs -----------------------------------------------------------------------------------
py 'import sys; sys.stdout.write("{\"ops\": " + "[" * 70000 + "]" * 70000 + "}")' > deep-graph.json
py 'import sys; sys.stdout.write("{\"placement\": " + "{\"a\": " * 70000 + "0" + "}" * 70000 + "}")' > deep-placement.json
seed_trace=$repo/fuzz/seeds/trace/kineto-two-steps.json
py 'import sys
d = open(sys.argv[1]).read()
i = d.index("\"Input Dims\": ") + len("\"Input Dims\": ")
sys.stdout.write(d[:i] + "[" * 70000 + "]" * 70000 + ", \"Concrete Inputs\": " + "[" * 70000 + "]" * 70000 + ", \"x\": " + d[i:])' \
  "$seed_trace" > deep-trace.json
sed '0,/"ts": 1010/s//"ts": 1e400/' "$seed_trace" > ts-1e400.json
sed 's/ProfilerStep#7/ProfilerStep#123456789012345678901/' "$seed_trace" > profiler-step-20-digits.json
# 1 GiB of spaces: a gzip file of about 1 MB that inflates past the 128 MiB limit.
head -c 1073741824 /dev/zero | tr '\0' ' ' | gzip -1 > bomb.pt.trace.json.gz

py 'import sys
d = open(sys.argv[1], "rb").read()
assert d.count(b"strides@\x01@\x01") == 1
sys.stdout.buffer.write(d.replace(b"strides@\x01@\x01", b"strides@\x00@\x00"))' "$repo/tests/data/onnx/tiny_pad_pool.onnx" > averagepool-stride-0.onnx
py 'import sys
d = open(sys.argv[1], "rb").read()
assert d.count(b"strides@\x02@\x02") == 1
sys.stdout.buffer.write(d.replace(b"strides@\x02@\x02", b"strides@\x00@\x00"))' "$repo/tests/data/onnx/tiny_cnn.onnx" > maxpool-stride-0.onnx

# A million Relu nodes in a chain, written as protobuf by hand (no onnx module needed): 26 MB.
py 'import sys
def varint(v):
    b = bytearray()
    while True:
        b.append((v & 0x7f) | (0x80 if v > 0x7f else 0))
        v >>= 7
        if not v: return bytes(b)
def field(tag, payload): return bytes([tag]) + varint(len(payload)) + payload
nodes = b"".join(field(0x0a, field(0x0a, b"t%d" % i) + field(0x12, b"t%d" % (i + 1)) + field(0x22, b"Relu"))
                 for i in range(1000000))
sys.stdout.buffer.write(b"\x08\x08" + field(0x3a, nodes) + field(0x42, b"\x10\x0d"))' > million-nodes.onnx

"$P" machines k80x4 --yaml > k80x4.yaml
sed '0,/peak_flops: 280 GFLOP\/s/s//peak_flops: 1e-320/' k80x4.yaml > flops-1e-320.yaml
sed '0,/bandwidth_Bps: 19.9 GB\/s/s//bandwidth_Bps: 1e-320/' k80x4.yaml > bandwidth-1e-320.yaml
sed '0,/bandwidth_Bps: 19.9 GB\/s/s//bandwidth_Bps: 1e30 GB\/s/' k80x4.yaml > bandwidth-1e30.yaml
{ echo '? [a, b]'; echo ': 1'; cat k80x4.yaml; } > list-key-machine.yaml
# random_machine NAME GPUS SWITCHES: one CPU and GPUS GPUs under SWITCHES switches (a random tree,
# 30 % of the GPUs on a second switch, extra switch links), every link direction with its own
# bandwidth and latency: bench/sim_bench.cpp's random_machine as a file, NAME.yaml.
random_machine() {
  py 'import random, sys
name, n, s = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
r = random.Random(99)
device = "peak_flops: {}, memory_bandwidth_Bps: 1e11, memory_bytes: 17179869184, streams: 1, launch_overhead_s: 5e-6"
print(f"name: {name}\ndevices:\n  - {{name: cpu:0, kind: cpu, " + device.format(1e12) + "}")
for i in range(n):
    print(f"  - {{name: gpu:{i}, kind: gpu, " + device.format(1e13) + "}")
print("switches: [" + ", ".join(f"sw:{i}" for i in range(s)) + "]\nlinks:")
def link(a, b):
    print(f"  - {{a: {a}, b: {b}, kind: pcie, bandwidth_Bps: {r.uniform(1e9, 5e10):.6e}, latency_s: {r.uniform(0, 1e-5):.6e},"
          f" reverse_bandwidth_Bps: {r.uniform(1e9, 5e10):.6e}, reverse_latency_s: {r.uniform(0, 1e-5):.6e}}}")
link("cpu:0", "sw:0")
for i in range(1, s): link(f"sw:{i}", f"sw:{r.randrange(i)}")
for i in range(n):
    link(f"gpu:{i}", f"sw:{r.randrange(s)}")
    if r.random() < 0.3: link(f"gpu:{i}", f"sw:{r.randrange(s)}")
for i in range(n // 16):
    a, b = r.randrange(s), r.randrange(s)
    if a != b: link(f"sw:{a}", f"sw:{b}")' "$@" > "$1.yaml"
}
random_machine thousand 1000 40 && mv thousand.yaml thousand-gpus.yaml
# The most a machine holds (4,096 devices) under 163 switches: routing fills a table of every
# pair, 16.8 million routes, so this case has 10 s (docs/reliability.md).
random_machine four-thousand 4095 163 && mv four-thousand.yaml four-thousand-devices.yaml

scenario() {  # scenario NAME [EXTRA LINES...]: a small valid scenario, then the extra lines
  local name=$1
  shift
  { echo "name: $name"; echo "model: cifar10_cnn:batch=8"; echo "machine: k80x4"; echo "samples: 120"
    echo "batch: 12"; echo "learners: {post: {}}"; echo "baselines: [single_gpu]"; printf '%s\n' "$@"; } > "$name.yaml"
}
scenario escape 'name: ../../elsewhere' && sed -i '1d' escape.yaml
scenario absurd-seeds 'seeds: 1099511627776'
scenario endless 'samples: 9223372036854775807' && sed -i '/^samples: 120$/d' endless.yaml
scenario infinite-paper 'paper: {single_gpu: .inf}'
scenario list-key '? [a, b]' ': 1'
scenario good
mkdir -p a-folder

echo "| loader | input | exit | message (first line) | wall s | max RSS MB |"
echo "|---|---|---|---|---|---|"
# --- graph, placement and trace JSON ----------------------------------------------------------
try "graph JSON" "nested 70,000 levels" 2 "deep-graph.json:1" "$P" inspect deep-graph.json
try "placement JSON" "nested 70,000 levels" 2 "deep-placement.json:1" \
  "$P" simulate --model cifar10_cnn --machine k80x4 --placement deep-placement.json
try "Kineto trace" "\`Input Dims\` and \`Concrete Inputs\` nested 70,000 levels" 2 "deep-trace.json:[0-9]+" \
  "$P" calibrate --backend trace --trace deep-trace.json --machine dgx1 --out cal.yaml
try "Kineto trace" "\`ts: 1e400\`" 2 "ts-1e400.json:[0-9]+" \
  "$P" calibrate --backend trace --trace ts-1e400.json --machine dgx1 --out cal.yaml
try "Kineto trace" "\`ProfilerStep#123456789012345678901\` (20 digits)" 0 "" \
  "$P" calibrate --backend trace --trace profiler-step-20-digits.json --machine dgx1 --out cal.yaml
try "Kineto trace" "gzip of $(($(stat -c %s bomb.pt.trace.json.gz) / 1024)) KB inflating to 1 GiB" 2 "bomb.pt.trace.json.gz" \
  "$P" calibrate --backend trace --trace bomb.pt.trace.json.gz --machine dgx1 --out cal.yaml
# --- ONNX -------------------------------------------------------------------------------------
try "ONNX" "AveragePool with \`strides: [0, 0]\`" 2 "averagepool-stride-0.onnx.*strides" "$P" import averagepool-stride-0.onnx --batch 2 -o a.json
try "ONNX" "MaxPool with \`strides: [0, 0]\`" 2 "maxpool-stride-0.onnx.*strides" "$P" import maxpool-stride-0.onnx --batch 2 -o m.json
try "ONNX" "a chain of 1,000,000 nodes (26 MB)" 2 "million-nodes.onnx: 1000000 nodes: at most 500000" "$P" import million-nodes.onnx -o big.json
# --- machine files ----------------------------------------------------------------------------
try "machine YAML" "\`peak_flops: 1e-320\`" 2 "flops-1e-320.yaml:[0-9]+" \
  "$P" simulate --model cifar10_cnn --machine flops-1e-320.yaml --placement single_gpu
try "machine YAML" "\`bandwidth_Bps: 1e-320\`" 2 "bandwidth-1e-320.yaml:[0-9]+" \
  "$P" simulate --model cifar10_cnn --machine bandwidth-1e-320.yaml --placement single_gpu
try "machine YAML" "\`bandwidth_Bps: 1e30 GB/s\`" 2 "bandwidth-1e30.yaml:[0-9]+" \
  "$P" simulate --model cifar10_cnn --machine bandwidth-1e30.yaml --placement single_gpu
try "machine YAML" "a list as a key" 2 "list-key-machine.yaml:[0-9]+" \
  "$P" simulate --model cifar10_cnn --machine list-key-machine.yaml --placement single_gpu
try "machine YAML" "1,000 GPUs, 40 switches, every link direction its own bandwidth" 0 "" \
  "$P" simulate --model cifar10_cnn --machine thousand-gpus.yaml --placement single_gpu
# --- scenarios --------------------------------------------------------------------------------
try "scenario YAML" "\`name: ../../elsewhere\`" 2 "escape.yaml:[0-9]+.*plain name" "$P" run escape.yaml --output out-escape
try "scenario YAML" "\`seeds: 1099511627776\`" 2 "absurd-seeds.yaml:[0-9]+" "$P" run absurd-seeds.yaml
try "scenario YAML" "\`samples: 9223372036854775807\`" 2 "endless.yaml:[0-9]+" "$P" run endless.yaml
try "scenario YAML" "\`paper: {single_gpu: .inf}\`" 2 "infinite-paper.yaml:[0-9]+" "$P" run infinite-paper.yaml
try "scenario YAML" "a list as a key" 2 "list-key.yaml:[0-9]+" "$P" run list-key.yaml
# --- output paths -----------------------------------------------------------------------------
try "output path" "\`-o\` into a missing folder" 2 "missing/graph.json" "$P" export cifar10_cnn -o missing/graph.json
try "output path" "\`-o\` naming a folder" 2 "a-folder" "$P" export cifar10_cnn -o a-folder
try "output path" "\`-o\` where nothing may be written (/proc)" 2 "/proc/placelab.json" "$P" export cifar10_cnn -o /proc/placelab.json
try "output path" "\`--trace\` into a missing folder" 2 "missing/step.json" \
  "$P" simulate --model cifar10_cnn --machine k80x4 --placement single_gpu --trace missing/step.json
try "output path" "\`--out\` into a missing folder (made, as docs/cli.md says)" 0 "" \
  "$P" calibrate --backend trace --trace "$seed_trace" --machine dgx1 --out missing/cal.yaml
try "output path" "\`--output\` under a file" 2 "good.yaml" "$P" run good.yaml --output good.yaml/out
# --- results folders --------------------------------------------------------------------------
"$P" run good.yaml --output out-good > /dev/null 2>&1
record=$(ls out-good/runs/post-seed1*.json | head -n 1)
head -c 40 "$record" > truncated && mv truncated "$record"
try "results folder" "a truncated \`runs/\` record, then \`--resume\`" 0 "$(basename "$record").*again" \
  "$P" run good.yaml --output out-good --resume
# Another scenario's record of the same learner and seed, with another sample budget: a run that
# differs in nothing that determines it would be the same run, and is rightly kept.
scenario other 'learners: {reinforce: {}}' 'samples: 96' && sed -i '/^learners: {post: {}}$/d; /^samples: 120$/d' other.yaml
"$P" run other.yaml --output out-other > /dev/null 2>&1
cp out-other/runs/reinforce-seed1*.json out-good/runs/
sed -i 's/^learners: {post: {}}$/learners: {post: {}, reinforce: {}}/' good.yaml
try "results folder" "another scenario's record (96 samples, not 120) copied into \`runs/\`, then \`--resume\`" 0 "reinforce-seed1.*again" \
  "$P" run good.yaml --output out-good --resume
odd="it's \$(touch pwned) run's"
cp -r out-good "$odd"
try "results folder" "a folder named \`$odd\`, then \`report\` (its plots)" 0 "" "$P" report "$odd"
if [[ -e pwned ]]; then
  echo "| results folder | a folder named \`$odd\` | | **FAILED: its name ran \`touch pwned\`** | | |"
  failed=1
fi
py 'import json, sys
d = json.load(open(sys.argv[1]))
d["model"] = 5
json.dump(d, open(sys.argv[1], "w"))' out-good/summary.json
try "results folder" "\`summary.json\` damaged by hand (a number for the model), then \`report\`" 2 "out-good/summary.json" \
  "$P" report out-good
scenario slow 'samples: 100000' && sed -i '/^samples: 120$/d' slow.yaml
"$P" run slow.yaml --output out-slow > /dev/null 2>&1 &
first=$!
for _ in $(seq 50); do [[ -s out-slow/.lock ]] && break; sleep 0.1; done
try "results folder" "a second run into a folder a run is writing" 2 "process $first" "$P" run slow.yaml --output out-slow
kill "$first" 2> /dev/null
wait "$first" 2> /dev/null
# --- files that are not files, links that point out (issue "Hostile input, third round") -----
mkfifo fifo.json
mkdir -p outside && echo keep > outside/precious.txt
snapshot=$(cd outside && find . -printf '%p %s %T@\n' | sort)
try "graph JSON" "a FIFO no one writes to" 2 "fifo.json: cannot read: it is a FIFO" "$P" inspect fifo.json
try "graph JSON" "\`/dev/zero\`" 2 "/dev/zero: cannot read: it is a character device" "$P" inspect /dev/zero
try "machine YAML" "\`/dev/zero\`" 2 "/dev/zero: cannot read: it is a character device" \
  "$P" simulate --model cifar10_cnn --machine /dev/zero --placement single_gpu
try "scenario YAML" "a FIFO no one writes to" 2 "fifo.json: cannot read: it is a FIFO" "$P" run fifo.json
try "Kineto trace" "\`/dev/zero\`" 2 "/dev/zero: cannot read: it is a character device" \
  "$P" calibrate --backend trace --trace /dev/zero --machine dgx1 --out cal.yaml
try "graph JSON" "\`\"ops\": []\`" 2 "empty.json:1: /ops: a graph needs at least one op" \
  bash -c "echo '{\"format\": \"placelab-graph\", \"version\": 1, \"ops\": [], \"edges\": []}' > empty.json && \"$P\" simulate --graph empty.json --machine k80x4"
try "output path" "\`-o\` onto a FIFO" 2 "fifo.json: it is not a regular file" "$P" export cifar10_cnn -o fifo.json
[[ -p fifo.json ]] || { echo "| output path | \`-o\` onto a FIFO | | **FAILED: the FIFO was replaced** | | |"; failed=1; }
mkdir -p out-lock && ln -s "$work/outside/precious.txt" out-lock/.lock
try "results folder" "\`.lock\` a link to a file outside" 2 "lock file: it is a symbolic link" "$P" run good.yaml --output out-lock
mkdir -p out-runs && ln -s "$work/outside" out-runs/runs
try "results folder" "\`runs/\` a link to a folder outside" 2 "runs: not a folder of this output" "$P" run good.yaml --output out-runs
try "sweep" "\`--name ../../escape\`" 2 "must be a plain name" "$P" sweep good.yaml --name ../../escape
try "sweep" "\`--rank-timeout nan\`" 2 "rank-timeout" "$P" sweep good.yaml --rank-timeout nan
scenario twice 'seeds: [3, 3]'
try "scenario YAML" "\`seeds: [3, 3]\`" 2 "twice.yaml:[0-9]+: seeds\\[\\] = 3: listed twice" "$P" run twice.yaml
scenario wide 'grouping: metis' 'groups: 4294967297'
try "scenario YAML" "\`groups: 4294967297\`" 2 "wide.yaml:[0-9]+" "$P" run wide.yaml
try "model spec" "\`nmt:layers=100000\`" 2 "about [0-9]+ ops .*more than" "$P" simulate --model nmt:layers=100000 --machine k80x4
try "model spec" "\`bert_base:layers=100000\`" 2 "about [0-9]+ ops .*more than" "$P" simulate --model bert_base:layers=100000 --machine k80x4
py 'print("name: big\ndevices:")
for i in range(5000): print(f"  - {{name: gpu:{i}, kind: gpu, peak_flops: 1e13, memory_bandwidth_Bps: 1e11, memory_bytes: 1e9}}")' > five-thousand-gpus.yaml
try "machine YAML" "5,000 GPUs in one node" 2 "five-thousand-gpus.yaml:[0-9]+: devices = 5000 devices: a machine may hold at most" \
  "$P" simulate --model cifar10_cnn --machine five-thousand-gpus.yaml
printf 'name: c\ncluster:\n  node: /etc/passwd\n  nodes: 2\n  network: {bandwidth_Bps: 1 GB/s, latency_s: 1 us}\n' > passwd-node.yaml
try "machine YAML" "\`/etc/passwd\` as a cluster's node" 2 "passwd-node.yaml:3: cluster.node = /etc/passwd: .*bytes\\)" \
  "$P" simulate --model cifar10_cnn --machine passwd-node.yaml
sed '0,/"cat": "kernel", \(.*\)"dur": [0-9.]*/s//"cat": "kernel", \1"dur": 1e15/' "$seed_trace" > kernel-1e15.json
try "Kineto trace" "a kernel of \`dur: 1e15\` µs" 2 "kernel-1e15.json:[0-9]+: dur = 1e\\+15" \
  "$P" calibrate --backend trace --trace kernel-1e15.json --machine dgx1 --out cal.yaml
sed '0,/"dur": 80/s//"dur": -80/' "$seed_trace" > negative-dur.json
try "Kineto trace" "an event of \`dur: -80\`" 2 "negative-dur.json:[0-9]+: dur = -80" \
  "$P" calibrate --backend trace --trace negative-dur.json --machine dgx1 --out cal.yaml
try "model spec" "\`resnet50:image=2147483647\`" 2 "image = 2147483647: must be a positive integer, at most" \
  "$P" simulate --model resnet50:image=2147483647 --machine k80x4
try "model spec" "\`alexnet:image=1\`" 2 "image = 1: must be >= 223 pixels" "$P" simulate --model alexnet:image=1 --machine k80x4
try "command line" "\`--seeds 01750\` (octal to CLI11)" 2 "in decimal digits, without leading zeros" "$P" run good.yaml --seeds 01750
try "command line" "\`--only-seed -1\`" 2 "in decimal digits, without leading zeros" "$P" run good.yaml --only-seed -1
scenario hex 'seeds: 0x10'
try "scenario YAML" "\`seeds: 0x10\`" 2 "hex.yaml:[0-9]+: seeds = 0x10" "$P" run hex.yaml
scenario period 'learners: {ppo: {samples_per_update: 2147483647}}' && sed -i '/^learners: {post: {}}$/d' period.yaml
try "scenario YAML" "\`samples_per_update: 2147483647\`" 2 "period.yaml:[0-9]+: learners.ppo.samples_per_update = 2147483647: must be in" \
  "$P" run period.yaml
try "sweep" "one scenario file twice" 2 "listed twice in the sweep" "$P" sweep good.yaml ./good.yaml --name twice
wall_limit=10 try "routing" "a random machine of 4,096 devices under 163 switches (limit 10 s)" 0 "" \
  "$P" machines four-thousand-devices.yaml
"$P" sweep slow.yaml --name busy > /dev/null 2>&1 &
first=$!
for _ in $(seq 50); do [[ -s results/sweep-busy/.lock ]] && break; sleep 0.1; done
try "sweep" "a second sweep of the same \`--name\` while the first runs" 2 "sweep-busy: another placelab run \\(process $first\\)" \
  "$P" sweep slow.yaml --name busy
kill "$first" 2> /dev/null
wait "$first" 2> /dev/null
pkill -f "placelab run slow.yaml" 2> /dev/null
if [[ "$snapshot" != "$(cd outside && find . -printf '%p %s %T@\n' | sort)" ]]; then
  echo "| output paths | the folder beside the output | | **FAILED: something outside the output folder changed** | | |"
  failed=1
fi
exit $failed
