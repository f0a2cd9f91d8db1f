#!/usr/bin/env bash
# Fuzzes pool files (issue 3 §6), then the memcached protocol parser
# (tests/fuzz/protocol_fuzz.cc, seeds in tests/fuzz/protocol_seeds), each for
# a bounded time: builds the libFuzzer
# target tests/fuzz/pool_fuzz.cc with clang (cmake preset `fuzz`), regenerates
# the seed corpus (small valid pools of every persistent index), then runs
# the fuzzer for SECONDS seconds over the corpus kept in the build directory,
# the seeds and tests/fuzz/regressions (inputs that once found a bug). Fails
# (exit 1) on any crash, hang (> 10 s per input), leak or sanitizer report,
# and prints how to reproduce it.
# Without clang++ or libFuzzer it says so and exits 0 (skipped), so that
# `make test` still runs on a machine without them; scripts/install-deps
# installs both.
#
# Usage: tests/fuzz/run-fuzz.sh [SECONDS]        (default 60)
# Environment: FUZZ_RUNS           if set: a reproducible run for `make test`:
#                                  exactly this many inputs from seed 1 over a
#                                  fresh corpus (SECONDS stays an upper bound),
#                                  so the same commit always tries the same
#                                  inputs and CI cannot turn red by luck
#              PROTOCOL_FUZZ_RUNS  with FUZZ_RUNS: the protocol fuzzer's inputs
#                                  (default 20000)
#              NVINDEX_FUZZ_BUILD  build directory (default build/fuzz)
#              JOBS                parallel build jobs (default nproc)
#              FUZZ_ARGS           extra libFuzzer flags, e.g. "-jobs=2 -workers=2"
set -euo pipefail

seconds=${1:-60}
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${NVINDEX_FUZZ_BUILD:-$root/build/fuzz}
jobs=${JOBS:-$(nproc)}

# clang 16: the code uses std::source_location, which clang 14 (Debian 12's
# default clang) cannot compile with libstdc++ 12.
fuzzer_lib=$(ls /usr/lib/llvm-16/lib/clang/16/lib/linux/libclang_rt.fuzzer-x86_64.a 2>/dev/null || true)
if ! command -v clang++-16 >/dev/null || [[ -z "$fuzzer_lib" ]]; then
  echo "test-fuzz: SKIPPED: clang++-16 and libFuzzer (libclang-rt-16-dev) are needed; scripts/install-deps installs them" >&2
  exit 0
fi

cd "$root"
cmake --preset fuzz -B "$build" >/dev/null
cmake --build "$build" -j "$jobs" --target pool_fuzz pool_fuzz_seeds protocol_fuzz

rm -rf "$build/seeds"
"$build/pool_fuzz_seeds" "$build/seeds"
mkdir -p "$build/artifacts"

# fuzz TARGET WHAT RUNS MAX_LEN DICT SEED_DIR...: runs one libFuzzer target
# over its corpus in the build directory (a fresh one, RUNS inputs from seed
# 1, when FUZZ_RUNS is set; else SECONDS seconds), exits 1 on a finding.
# ASan: abort_on_error off so libFuzzer writes the crashing input first;
# UBSan: halt on the first report (set at compile time too).
fuzz() {
  local target=$1 what=$2 runs=$3 max_len=$4 dict=$5
  shift 5
  local corpus="$build/$target-corpus" limits=()
  if [[ -n "${FUZZ_RUNS:-}" ]]; then
    corpus="$build/$target-corpus-reproducible"
    rm -rf "$corpus"
    limits=(-seed=1 -runs="$runs")
  fi
  mkdir -p "$corpus"
  echo "test-fuzz: fuzzing $what for ${FUZZ_RUNS:+$runs inputs from seed 1, at most }$seconds s (corpus $corpus)" >&2
  local rc=0
  set +e
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} \
  UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
  "$build/$target" "$corpus" "$@" \
    "${limits[@]}" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len="$max_len" \
    -dict="$dict" -artifact_prefix="$build/artifacts/$target-" \
    -print_final_stats=1 ${FUZZ_ARGS:-} 2>"$build/$target.log"
  rc=$?
  set -e
  tail -n 25 "$build/$target.log" >&2
  if [[ $rc -ne 0 ]]; then
    echo "test-fuzz: FAILED (exit $rc). Full log: $build/$target.log. Crashing input(s):" >&2
    ls -1 "$build/artifacts" >&2 || true
    echo "Reproduce: $build/$target $build/artifacts/$target-<file>" >&2
    exit 1
  fi
}

fuzz pool_fuzz "pool files" "${FUZZ_RUNS:-0}" 65536 "$root/tests/fuzz/pool.dict" \
  "$build/seeds" "$root/tests/fuzz/regressions"
# The memcached protocol parser: fewer inputs (each opens two stores).
fuzz protocol_fuzz "the memcached protocol" "${PROTOCOL_FUZZ_RUNS:-20000}" 8192 \
  "$root/tests/fuzz/protocol.dict" "$root/tests/fuzz/protocol_seeds"
echo "test-fuzz: ok" >&2
