#!/usr/bin/env bash
# Installs the Debian packages placelab builds and runs with, only those that are missing.
# Idempotent: when everything is present it does nothing (no apt-get update, no network).
#   scripts/install-deps.sh           what `make build` and `make run` need
#   scripts/install-deps.sh --tests   that, plus what only tests use (`make test`)
set -euo pipefail

packages=(
  build-essential cmake make time  # time: /usr/bin/time for scripts/hostile-inputs.sh
  libboost-graph-dev libeigen3-dev libyaml-cpp-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev nlohmann-json3-dev libfmt-dev libspdlog-dev zlib1g-dev
  libmetis-dev libscotch-dev coinor-libcbc-dev
  libonnx-dev libprotobuf-dev
  libopenmpi-dev openmpi-bin
  python3-matplotlib python3-onnx
  pybind11-dev python3-dev python3-numpy python3-pytest
  clang-16 libclang-rt-16-dev  # make fuzz / make sanitize: libFuzzer, ASan, UBSan (Clang >= 16)
)
# python3-torch 1.13 and python3-torchvision 0.14 run placelab.torch.capture's tests (test_torch_capture.py:
# torchvision's resnet50 and inception_v3), examples/python/reinforce_torch.py in python/tests/test_examples.py and
# apply_module_map's tests (test_frameworks.py). On Debian 12 it pulls 161 packages (135 MB of
# archives, 568 MB on disk; about 40 s to unpack after the download), so only `make test` asks for it.
test_packages=(python3-torch python3-torchvision)
if [[ ${1:-} == --tests ]]; then
  packages+=("${test_packages[@]}")
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "install-deps: not root and no sudo; install: ${missing[*]}" >&2; exit 1; }
  sudo_cmd=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
