# placelab — the two commands a user needs: `make run` and `make test`.
# Both install missing Debian packages first (scripts/install-deps.sh), then build in build/.
BUILD_DIR ?= build
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=
PLACELAB := $(BUILD_DIR)/apps/placelab

# Fuzzing (docs/reliability.md, "Fuzzing"): Clang + libFuzzer + ASan + UBSan, in build-fuzz/.
# `make fuzz` runs every target for FUZZ_SECONDS each; `make fuzz FUZZ_SECONDS=3600` is a campaign.
# Clang 16 at least: 14 and 15 cannot capture structured bindings in lambdas, as our C++20 does.
FUZZ_CXX ?= clang++-16
FUZZ_DIR ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?=
SANITIZE_DIR ?= build-asan

# `make sanitize`: the unit tests of the loaders and the simulator under ASan + UBSan. Left out:
# the learners' and the CLI's tests (learner runs, several times slower under ASan; the learners
# library, the CLI and their tests are most of the compile time, which CI's 2 cores pay for), the serial
# overlap test and the CPU calibrator's timing tests (profiler_calibrator_test: figures measured
# under ASan mean nothing). docs/reliability.md, "Sanitizers in CI", has the times.
SANITIZE_TESTS ?= core/core_test graph/graph_test hwmodels/hwmodels_test sim/sim_test models/models_test \
  models/onnx_import_test profiler/profiler_test
SANITIZE_FILTER ?= *
# The sanitized builds' optimisation and debug info: -O1, which ASan's and libFuzzer's docs name for
# a fast enough run, and line tables only (-g1), which is all a sanitizer's stack trace prints. Full
# -g at -O2 made them 2.6 times slower to compile with GCC (sim/src/simulator.cpp: 25.6 s against 9.7 s).
SANITIZE_CXX_FLAGS ?= -O1 -g1 -DNDEBUG

.PHONY: all deps test-deps configure build python run test test-fast bench clean fuzz-configure fuzz-build fuzz sanitize

all: build

deps:
	@bash scripts/install-deps.sh

# What only the tests use as well (python3-torch for the PyTorch example's test).
test-deps:
	@bash scripts/install-deps.sh --tests

configure: deps
	cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(if $(CI),-DPLACELAB_WERROR=ON) $(CMAKE_FLAGS)

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

# The Python module alone (docs/python.md): PYTHONPATH=$(BUILD_DIR)/python /usr/bin/python3 -c "import placelab"
python: configure
	cmake --build $(BUILD_DIR) -j $(JOBS) --target placelab_python

# The quickstart scenario (see README.md).
run: build
	$(PLACELAB) run scenarios/quickstart.yaml

test: build test-deps
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS)

# The unit tests alone (CTest label `fast`, cmake/placelab_helpers.cmake says what each label
# holds): under a minute once built, for the edit-build-test loop. `make test` runs every label.
test-fast: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS) -L fast

# Google Benchmark reports as JSON under results/bench/.
bench: build
	@mkdir -p results/bench
	@for b in $(BUILD_DIR)/bench/*_bench; do \
	  echo "== $$b"; \
	  $$b --benchmark_out=results/bench/$$(basename $$b).json --benchmark_out_format=json || exit 1; \
	done

fuzz-configure: deps
	cmake -S . -B $(FUZZ_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=$(FUZZ_CXX) \
	  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$(SANITIZE_CXX_FLAGS)" \
	  -DPLACELAB_FUZZ=ON -DPLACELAB_SANITIZERS="address;undefined" -DPLACELAB_WITH_CUDA=OFF \
	  -DPLACELAB_BUILD_BENCH=OFF $(CMAKE_FLAGS)

fuzz-build: fuzz-configure
	cmake --build $(FUZZ_DIR) -j $(JOBS) --target fuzzers

fuzz: fuzz-build
	bash fuzz/run.sh $(FUZZ_DIR) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

# The tests under ASan + UBSan (GCC, in build-asan/); the fuzzing build holds only the fuzz targets.
sanitize: deps
	cmake -S . -B $(SANITIZE_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$(SANITIZE_CXX_FLAGS)" \
	  -DPLACELAB_SANITIZERS="address;undefined" \
	  -DPLACELAB_WITH_CUDA=OFF -DPLACELAB_BUILD_BENCH=OFF $(CMAKE_FLAGS)
	cmake --build $(SANITIZE_DIR) -j $(JOBS) --target $(notdir $(SANITIZE_TESTS))
	@for t in $(SANITIZE_TESTS); do \
	  echo "== $$t"; \
	  $(SANITIZE_DIR)/tests/$$t --gtest_brief=1 --gtest_filter='$(SANITIZE_FILTER)' || exit 1; \
	done

clean:
	rm -rf $(BUILD_DIR) $(FUZZ_DIR) $(SANITIZE_DIR)
