#!/usr/bin/env bash
# Sanitizer runs of the tests (issue 32): a separate build tree per sanitizer,
# outside CI's time budget (a sanitized build of the engine is ~25 CPU-minutes
# on its own); tests/sanitize/README.md records the last runs.
#
#   tests/sanitize/run.sh asan [BUILD_DIR]   ASan + UBSan: every unit test binary
#   tests/sanitize/run.sh tsan [BUILD_DIR]   TSan: the threaded units (thread pool,
#                                            io_uring reader and reaper, heartbeat, daemon)
#   tests/sanitize/run.sh threads [BUILD_DIR]  TSan of the thread pool and the heartbeat
#                                            alone (ns_test_threads: no engine, minutes)
#
# Exit 0 when every selected test passes with no sanitizer report (reports abort
# the test: -fno-sanitize-recover=all, halt_on_error).
set -euo pipefail
kind=${1:?usage: tests/sanitize/run.sh asan|tsan|threads [BUILD_DIR]}
root="$(cd "$(dirname "$0")/../.." && pwd)"
case "$kind" in
  asan)
    flags="address,undefined"
    targets=(ns_test_util ns_test_gguf ns_test_kernels ns_test_quantize ns_test_tokenizer ns_test_sampler ns_test_stream
             ns_test_chat ns_test_grammar ns_test_engine ns_test_causality ns_test_jobs ns_test_daemon ns_test_cli
             ns_test_http nightshift nightshift-make-model)
    tests='^unit\.(util|gguf|kernels|quantize|tokenizer|sampler|stream|chat|grammar|engine|causality|jobs|daemon'
    tests+='|cli|http)$' ;;
  tsan)
    flags="thread"
    targets=(ns_test_util ns_test_stream ns_test_tokenizer ns_test_jobs ns_test_daemon)
    tests='^unit\.(util|stream|tokenizer|jobs|daemon)$' ;;
  threads)
    flags="thread"
    targets=(ns_test_threads)
    tests='^sanitize\.threads$' ;;
  *) echo "unknown sanitizer run '$kind': use asan, tsan or threads" >&2; exit 2 ;;
esac
build=${2:-$root/build-${kind/threads/tsan}}
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNS_WERROR=ON -DNS_SANITIZE="$flags" >/dev/null
ninja -C "$build" -j"$(nproc)" "${targets[@]}"
# Leaks count as failures; UBSan prints a stack and stops at the first report.
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
ctest --test-dir "$build" -R "$tests" --output-on-failure -j"$(nproc)" --timeout 3000
