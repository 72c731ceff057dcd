#!/usr/bin/env bash
# Installs what is missing, builds Layerscope (Release, CUDA parts when nvcc is present), runs
# every test, then rebuilds the input-parsing tests with AddressSanitizer + UBSan and runs them.
set -euo pipefail
cd "$(dirname "$0")/.."

cmake/install-deps.sh
jobs=$(nproc)

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "$jobs"
ctest --test-dir build --output-on-failure -j "$jobs"

# Hostile inputs must give clean errors under the sanitizers too.
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DLAYERSCOPE_SANITIZE=ON -DLAYERSCOPE_GUI=OFF
cmake --build build-asan -j "$jobs" --target layerscope_sanitized_tests
ctest --test-dir build-asan --output-on-failure -j "$jobs" -L sanitized
