#!/usr/bin/env bash
# Installs the Debian packages placelab builds and runs with, only those that are missing.
# Idempotent: when everything is present it does nothing (no apt-get update, no network).
set -euo pipefail

packages=(
  build-essential cmake make
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
