#!/usr/bin/env bash
# Installs what is missing, builds Layerscope (Release, CUDA parts when nvcc is present) and runs
# every test; then every test again under AddressSanitizer + UBSan, the suites that run threads
# under ThreadSanitizer, and every fuzz target for LAYERSCOPE_FUZZ_SECONDS (45) seconds.
# Each phase prints its start and how long it took.
set -euo pipefail
cd "$(dirname "$0")/.."

phase_names=()
phase_seconds=()
phase_start=$SECONDS
phase() {
  if [ ${#phase_names[@]} -gt 0 ]; then
    phase_seconds+=($((SECONDS - phase_start)))
  fi
  phase_start=$SECONDS
  if [ $# -gt 0 ]; then
    phase_names+=("$1")
    echo "==== $(date '+%H:%M:%S') $1"
  fi
}
summary() {
  phase
  echo "==== phases (seconds):"
  for i in "${!phase_names[@]}"; do printf '%6d  %s\n' "${phase_seconds[$i]}" "${phase_names[$i]}"; done
  printf '%6d  total\n' "$SECONDS"
}
trap summary EXIT

phase "install packages"
cmake/install-deps.sh
jobs=$(nproc)

phase "release build"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "$jobs"
phase "release tests"
ctest --test-dir build --output-on-failure -j "$jobs"

# The sanitizer and fuzz builds use clang 14 at -O1 with assertions on (under ASan the tests run
# about 2.5 times faster than at -O0; the test files themselves build at -O0) and line tables only
# for the reports' file:line: together a third of g++'s time with full debug information.
sanitize_flags=(-DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=-gline-tables-only -O1" -DLAYERSCOPE_GUI=OFF
                -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14)

# Every test again with AddressSanitizer + UBSan (the GUI tests need the GUI build, which is off),
# but three suites: the whole-model runs of the emulated CUDA kernels on each architecture's
# llama.cpp fixture (DenseArchsCuda, MoeArchsCuda, HybridArchsCuda: 918 of the 2434 test-seconds
# this phase took on a 2-core machine). Under ASan their kernels still run op by op in BackendOps
# on every backend, the same architectures whole on the CPU, and the emulated kernels whole on
# the fixtures' models in CudaModels.
phase "asan+ubsan build"
cmake -S . -B build-asan -G Ninja "${sanitize_flags[@]}" -DLAYERSCOPE_SANITIZE=ON
cmake --build build-asan -j "$jobs"
phase "asan+ubsan tests"
ctest --test-dir build-asan --output-on-failure -j "$jobs" -E 'ArchsCuda\.'

# Data races: the suites that run threads, with ThreadSanitizer (no suppressions). Two cases are
# left out, their code runs in the others on smaller shapes: BackendOps.MulMat (TinyLlama-sized
# matrices, about 3 minutes under TSan) and CudaDequant.ModelSizedMatricesMatchTheCpu (50 s each).
phase "tsan build"
cmake -S . -B build-tsan -G Ninja "${sanitize_flags[@]}" -DLAYERSCOPE_SANITIZE=thread
cmake --build build-tsan -j "$jobs" --target layerscope_threaded_tests
phase "tsan tests"
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" ctest --test-dir build-tsan --output-on-failure -j "$jobs" \
  -L threads -E '^BackendOps\.MulMat$|ModelSizedMatricesMatchTheCpu'

# Fuzzing: clang + libFuzzer, every target for 45 seconds, two at a time.
phase "fuzz build"
cmake -S . -B build-fuzz -G Ninja "${sanitize_flags[@]}" -DLAYERSCOPE_FUZZ=ON
cmake --build build-fuzz -j "$jobs" --target layerscope_fuzzers
phase "fuzzing"
tests/fuzz/run_fuzzers.sh build-fuzz "${LAYERSCOPE_FUZZ_SECONDS:-45}"
