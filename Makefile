# The commands a user runs. Each first installs missing Debian packages
# (scripts/install-deps) and builds what it needs.
#   make bench   the main job: compare btree, fastfair, lbtree, fptree, wbtree, p-masstree, p-bwtree
#                and absl-btree on YCSB A, B, C, E with integer keys, then every string-capable
#                index with 24 B string keys, then TPC-C over btree and the persistent trees
#                (scripts/bench; BENCH_ARGS)
#   make bench-lbtree  the LB+-tree paper's sec. 4.2 workloads over lbtree,
#                fptree and wbtree (scripts/bench-lbtree; BENCH_LBTREE_ARGS)
#   make bench-ni  Ni et al. 2020's B+-tree design space: the six variants,
#                selective persistence, interleaving, group flushing
#                (scripts/bench-ni; BENCH_NI_ARGS)
#   make bench-pibench  the PiBench-style comparison: dash-eh, lbtree,
#                bztree, fastfair, fptree; read-only, 10%/50% updates or inserts,
#                uniform and Zipfian, 1 and 2 threads, tail latency and split
#                time (scripts/bench-pibench; BENCH_PIBENCH_ARGS)
#   make bench-patree  PA-Tree's Table I on this machine's disk:
#                patree (1 thread, 64 in flight, three probe strategies)
#                against patree-dedicated, patree-shared, leveldb and rocksdb
#                at 1..64 threads (scripts/bench-patree; BENCH_PATREE_ARGS)
#   make bench-kv  the LB+-tree paper's Memcached experiment (Figure 17):
#                nvindex serve over lbtree, fptree, wbtree, fastfair and
#                p-masstree loaded with 10M items, driven by nvindex kv-client
#                (libmemcached), against memcached; kill -9 recovery
#                (scripts/bench-kv; BENCH_KV_ARGS)
#   make test    every test: the format and doc-link checks, a release build and its ctest
#                tests (docs/cli.md checked against --help among them), then the installed library
#                (scripts/test-install: cmake --install, then examples/embed and examples/kv built
#                against it with find_package), then an ASan+UBSan build, then
#                the concurrent index tests under ThreadSanitizer, then
#                FUZZ_RUNS inputs of fuzzing pool files, then PROTOCOL_FUZZ_RUNS of
#                the memcached protocol parser (clang/libFuzzer; reproducible:
#                seed 1, fresh corpus; FUZZ_SECONDS at most each)
#   make test-long  the heavier crash checks kept out of make test (below; builds, but
#                installs no packages)
#   make build   the release build only (build/release/nvindex)
JOBS ?= $(shell nproc)
BENCH_ARGS ?=
BENCH_LBTREE_ARGS ?=
BENCH_NI_ARGS ?=
BENCH_PIBENCH_ARGS ?=
BENCH_PATREE_ARGS ?=
BENCH_KV_ARGS ?=
# Pool-file fuzzing in make test (tests/fuzz/run-fuzz.sh): a fixed number of
# inputs from a fixed seed, so a commit's result does not depend on luck or
# machine speed; FUZZ_SECONDS bounds the time. Longer: docs/crash-lab.md, "Running the fuzzers".
FUZZ_RUNS ?= 60000
PROTOCOL_FUZZ_RUNS ?= 20000
FUZZ_SECONDS ?= 120

.PHONY: test-long all deps build bench bench-lbtree bench-ni bench-pibench bench-patree bench-kv test test-release test-install test-asan test-tsan test-fuzz doc-links format format-check clean

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

bench-ni: build
	@scripts/bench-ni $(BENCH_NI_ARGS)

bench-pibench: build
	@scripts/bench-pibench $(BENCH_PIBENCH_ARGS)

bench-patree: build
	@scripts/bench-patree $(BENCH_PATREE_ARGS)

bench-kv: build
	@scripts/bench-kv $(BENCH_KV_ARGS)

test: deps format-check doc-links test-release test-install test-asan test-tsan test-fuzz

# Heavier checks kept out of `make test` (25 minutes on 2 cores): the crash
# lab's ablation self-test with the cases tests/crash_cases.h marks
# long-only (most integer cases, the string instances, the option variants)
# included, and the crash lab with every case whole (every case to 10,000
# images, btree-ls's logs, gc and prefetch variants), about 25 minutes, and
# the KV store's crash-lab case to 10,000 images per index (4.3 minutes), and
# nvindex serve's kill torture, 100 kills over lbtree and 100 over wbtree.
test-long:
	@cmake --preset release >/dev/null
	@cmake --build --preset release -j $(JOBS)
	@NVINDEX_TEST_LONG=1 ctest --preset release -j $(JOBS) -R 'crash_ablation_test|crash_lab_test|crash_kv_store_test|tool_serve_test'

# A documentation reference to a missing file fails the tests.
doc-links:
	@scripts/check-doc-links

test-release:
	@cmake --preset release >/dev/null
	@cmake --build --preset release -j $(JOBS)
	@ctest --preset release -j $(JOBS)

# Installs the release build into build/install and builds examples/embed and examples/kv
# against it, as a user of the library would.
test-install:
	@JOBS=$(JOBS) scripts/test-install

test-asan:
	@cmake --preset asan >/dev/null
	@cmake --build --preset asan -j $(JOBS)
	@ctest --preset asan -j $(JOBS)

# The tests that run concurrent index code (NVINDEX_TSAN_TESTS in
# CMakeLists.txt, ctest label "tsan"), again under ThreadSanitizer.
test-tsan:
	@cmake --preset tsan >/dev/null
	@cmake --build --preset tsan -j $(JOBS) --target tsan-tests
	@ctest --preset tsan -j $(JOBS) -L tsan

test-fuzz:
	@FUZZ_RUNS=$(FUZZ_RUNS) PROTOCOL_FUZZ_RUNS=$(PROTOCOL_FUZZ_RUNS) tests/fuzz/run-fuzz.sh $(FUZZ_SECONDS)

# Tracked files and new ones not yet added (--others), .gitignore'd ones left out.
format:
	@clang-format -i $$(git ls-files --cached --others --exclude-standard '*.h' '*.cc')

format-check:
	@clang-format --dry-run -Werror $$(git ls-files --cached --others --exclude-standard '*.h' '*.cc')

clean:
	rm -rf build
