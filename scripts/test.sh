#!/usr/bin/env bash
# Builds pmr and runs the whole test suite (CTest: unit, multi-rank through mpirun, examples,
# benchmarks in verify mode, compile-failure and install checks).
#   scripts/test.sh [build-dir] [extra CMake arguments...]
# e.g. scripts/test.sh build-asan -DPMR_SANITIZE=ON
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
shift || true
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPMR_WARNINGS_AS_ERRORS=ON "$@"
cmake --build "$build" -j"$(nproc)"
ctest --test-dir "$build" --output-on-failure --timeout 900 ${PMR_CTEST_ARGS:-}
