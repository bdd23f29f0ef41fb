#!/usr/bin/env bash
# Builds pmr against MPICH (next to Open MPI: Debian installs both side by side) in its own build
# directory and runs the tests there.
#   scripts/test-mpich.sh [build-dir] [ctest arguments...]
#   scripts/test-mpich.sh                      # build-mpich, the whole suite
#   scripts/test-mpich.sh build-mpich -L core  # only the multi-rank core tests
# PMR_CMAKE_ARGS adds CMake arguments, e.g. "-DPMR_TEST_MAX_RANKS=4 -DPMR_BUILD_EXAMPLES=OFF".
# Installs libmpich-dev (apt-get, as root or via sudo) if it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-mpich}
shift || true

if ! dpkg-query -W -f='${Status}' libmpich-dev 2>/dev/null | grep -q "ok installed"; then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    sudo="sudo"
  fi
  echo "test-mpich: installing libmpich-dev"
  $sudo apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    libmpich-dev
fi

# Debian's MPICH programs carry a .mpich suffix; the unsuffixed names belong to the default MPI.
fortran=()
if command -v mpif90.mpich > /dev/null; then
  fortran=(-DMPI_Fortran_COMPILER=mpif90.mpich)
fi
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPMR_WARNINGS_AS_ERRORS=ON \
  -DMPI_C_COMPILER=mpicc.mpich -DMPI_CXX_COMPILER=mpicxx.mpich "${fortran[@]}" \
  -DMPIEXEC_EXECUTABLE="$(command -v mpiexec.mpich)" ${PMR_CMAKE_ARGS:-} # one word per argument
grep -q "PMR_MPI_IMPLEMENTATION:INTERNAL=MPICH" "$build/CMakeCache.txt" || {
  echo "test-mpich: the build in $build did not pick MPICH" >&2
  exit 1
}
nice -n 10 cmake --build "$build" -j"$(nproc)"
nice -n 10 ctest --test-dir "$build" --output-on-failure --timeout 900 "$@"
