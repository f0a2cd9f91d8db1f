# The commands a user runs. Each first installs missing Debian packages
# (scripts/install-deps) and builds what it needs.
#   make bench   the main job: compare btree, fastfair, lbtree, fptree, wbtree and absl-btree on YCSB
#   make bench-lbtree  the LB+-tree paper's sec. 4.2 workloads over lbtree,
#                fptree and wbtree (scripts/bench-lbtree; BENCH_LBTREE_ARGS)
#   make test    every test: the doc-link check, a release build, then an ASan+UBSan build, then
#                the concurrent index tests under ThreadSanitizer, then
#                FUZZ_RUNS inputs of fuzzing pool files (clang/libFuzzer;
#                reproducible: seed 1, fresh corpus; FUZZ_SECONDS at most)
#   make build   the release build only (build/release/nvindex)
JOBS ?= $(shell nproc)
BENCH_ARGS ?=
BENCH_LBTREE_ARGS ?=
# The tests that run concurrent index code, run again under ThreadSanitizer.
TSAN_TESTS ?= index_concurrent_test index_fastfair_test crash_fastfair_review_test index_btree_test \
              index_inner_tree_test index_lbtree_test index_fptree_test index_wbtree_test \
              index_br_lock_test
empty :=
space := $(empty) $(empty)
# Pool-file fuzzing in make test (tests/fuzz/run-fuzz.sh): a fixed number of
# inputs from a fixed seed, so a commit's result does not depend on luck or
# machine speed; FUZZ_SECONDS bounds the time. Longer: see README.
FUZZ_RUNS ?= 150000
FUZZ_SECONDS ?= 120

.PHONY: all deps build bench bench-lbtree test test-release test-asan test-tsan test-fuzz doc-links format format-check clean

all: build

deps:
	@scripts/install-deps

build: deps
	@cmake --preset release >/dev/null
	@cmake --build --preset release -j $(JOBS)

bench: build
	@scripts/bench $(BENCH_ARGS)

bench-lbtree: build
	@scripts/bench-lbtree $(BENCH_LBTREE_ARGS)

test: deps format-check doc-links test-release test-asan test-tsan test-fuzz

# A documentation reference to a missing file fails the tests.
doc-links:
	@scripts/check-doc-links

test-release:
	@cmake --preset release >/dev/null
	@cmake --build --preset release -j $(JOBS)
	@ctest --preset release -j $(JOBS)

test-asan:
	@cmake --preset asan >/dev/null
	@cmake --build --preset asan -j $(JOBS)
	@ctest --preset asan -j $(JOBS)

test-tsan:
	@cmake --preset tsan >/dev/null
	@cmake --build --preset tsan -j $(JOBS) --target $(TSAN_TESTS)
	@ctest --preset tsan -j $(JOBS) -R '^($(subst $(space),|,$(strip $(TSAN_TESTS))))$$'

test-fuzz:
	@FUZZ_RUNS=$(FUZZ_RUNS) tests/fuzz/run-fuzz.sh $(FUZZ_SECONDS)

format:
	@clang-format -i $$(git ls-files '*.h' '*.cc')

format-check:
	@clang-format --dry-run -Werror $$(git ls-files '*.h' '*.cc')

clean:
	rm -rf build
