#!/usr/bin/env bash
# Installs what pmr needs to build, test and benchmark on Debian 12 (or Ubuntu 22.04+).
#   scripts/install-deps.sh             install the missing packages (apt-get, as root or via sudo)
#   scripts/install-deps.sh --missing   print them instead
set -euo pipefail
packages=(
  cmake ninja-build g++ pkg-config python3
  libopenmpi-dev openmpi-bin            # MPI: bootstrap and the baselines pmr is measured against
  libmpich-dev                          # MPICH beside Open MPI: scripts/test-mpich.sh
  gfortran                              # the Fortran module (PMR_WITH_FORTRAN)
  libucx-dev ucx-utils                  # UCX provider and ucx_perftest
  catch2 libbenchmark-dev               # tests and microbenchmarks
  libibverbs-dev librdmacm-dev libhwloc-dev  # verbs provider (libibverbs), topology
  iproute2                              # network namespaces for the multi-host tests
  gnuplot-nox                           # pmr-bench --plot
  libpetsc-real3.18-dev                 # a real MPI client for the interposer's tests (pmr-run)
  clang-format clang-tidy
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
# --missing: only print the packages still to install (one line, possibly empty); .ci/run uses it.
if [ "${1:-}" = --missing ]; then
  echo "${missing[*]}"
  exit 0
fi
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: everything is installed"
  exit 0
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  sudo="sudo"
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
