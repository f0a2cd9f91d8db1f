# The commands a user runs. Each first installs missing Debian packages
# (scripts/install-deps) and builds what it needs.
#   make bench   the main job: compare btree, fastfair and absl-btree on YCSB
#   make test    every test: release build, then an ASan+UBSan build
#   make build   the release build only (build/release/nvindex)
JOBS ?= $(shell nproc)
BENCH_ARGS ?=

.PHONY: all deps build bench test test-release test-asan test-tsan format clean

all: build

deps:
	@scripts/install-deps

build: deps
	@cmake --preset release >/dev/null
	@cmake --build --preset release -j $(JOBS)

bench: build
	@scripts/bench $(BENCH_ARGS)

test: deps test-release test-asan

test-release:
	@cmake --preset release >/dev/null
	@cmake --build --preset release -j $(JOBS)
	@ctest --preset release -j $(JOBS)

test-asan:
	@cmake --preset asan >/dev/null
	@cmake --build --preset asan -j $(JOBS)
	@ctest --preset asan -j $(JOBS)

test-tsan: deps
	@cmake --preset tsan >/dev/null
	@cmake --build --preset tsan -j $(JOBS)
	@ctest --preset tsan -j $(JOBS) -R 'concurrent'

format:
	@clang-format -i $$(git ls-files '*.h' '*.cc')

clean:
	rm -rf build
