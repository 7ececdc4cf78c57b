# placelab — the two commands a user needs: `make run` and `make test`.
# Both install missing Debian packages first (scripts/install-deps.sh), then build in build/.
BUILD_DIR ?= build
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=
PLACELAB := $(BUILD_DIR)/apps/placelab

.PHONY: all deps configure build python run test bench clean

all: build

deps:
	@bash scripts/install-deps.sh

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

test: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS)

# Google Benchmark reports as JSON under results/bench/.
bench: build
	@mkdir -p results/bench
	@for b in $(BUILD_DIR)/bench/*_bench; do \
	  echo "== $$b"; \
	  $$b --benchmark_out=results/bench/$$(basename $$b).json --benchmark_out_format=json || exit 1; \
	done

clean:
	rm -rf $(BUILD_DIR)
