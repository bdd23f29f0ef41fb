#!/usr/bin/env bash
# The standard measurement set on local ranks: pmr against MPI in the same run, with tables on the
# terminal and CSV, JSON and a plot per benchmark in the output directory.
#   scripts/measure.sh [output-dir]          (default: results/)
# Environment: PMR_MEASURE_ARGS adds pmr-bench options to every run (e.g. "--samples 31"),
# PMR_MEASURE_BUILD names the build directory (default build-release, configured as Release).
# Quiet machines give the best numbers: absolute times drift with load, the ratios much less.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-results}
build=${PMR_MEASURE_BUILD:-build-release}
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
if [ ! -x "$build/benchmarks/pmr-bench" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPMR_BUILD_TESTS=OFF >/dev/null
fi
cmake --build "$build" -j"$(nproc)" --target pmr-bench >/dev/null
bench="$build/benchmarks/pmr-bench"
extra=(${PMR_MEASURE_ARGS:-})

# One rank per core when there are enough cores, so that neither side waits for a time slice.
bind=(--bind-to core)
if [ "$(nproc)" -lt 2 ]; then
  bind=(--bind-to none --oversubscribe)
fi
# Open MPI's fastest settings on one node (see docs/measurements.md): the UCX PML for small messages, the
# vader BTL with CMA single copy from 64 KiB up. Both are measured; pmr does not depend on them.
ucx_pml=(--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any)
vader_cma=(--mca pml ob1 --mca btl vader,self --mca btl_vader_single_copy_mechanism cma)

run() {
  local name=$1 ranks=$2
  shift 2
  local mca=("${vader_cma[@]}")
  if [ "${name%%-*}" = ucxpml ]; then
    mca=("${ucx_pml[@]}")
  fi
  echo
  echo "=== $name ($ranks ranks): pmr-bench $*"
  mpirun -np "$ranks" "${bind[@]}" "${mca[@]}" "$bench" "$@" "${extra[@]}" \
    --csv "$out/$name.csv" --json "$out/$name.json" --plot "$out/$name.png"
}

run pingpong 2 pingpong
run ucxpml-pingpong 2 pingpong --sizes 0 8:64K
run exchange-1d 2 exchange --dims 1 --geom 2 --periodic
run exchange-3d 2 exchange --dims 3 --geom 2 1 1
run exchange-3d-buffered 2 exchange --dims 3 --geom 2 1 1 --buffered
echo
echo "measure: results in $out/ (*.csv, *.json, *.png)"
