#!/usr/bin/env bash
# Application time: the whole iteration of a stencil solver (compute and halo exchange), pmr
# against persistent MPI in the same run, on 2, 4 and 8 local ranks and several box sizes.
#   scripts/app-bench.sh [build-dir] [extra mpirun arguments...]
# Uses the examples pmr-stencil3d (6 faces of a 3D box, packed) and pmr-stencil2d-c (C interface;
# rows as user-buffer windows, packed columns), each solving alternately with MPI and pmr
# (--repeat) and keeping the fastest solve of each. Prints one table; the columns:
#   MPI ms, pmr ms   time per iteration (slowest rank)
#   MPI/pmr          > 1: pmr's iteration is faster
#   exch % (MPI)     share of MPI's iteration spent in the exchange (pack, communicate, unpack):
#                    the most any transport can save
# Ranks beyond the cores are started with --oversubscribe; such numbers include the time a rank
# waits for its neighbours to get a core.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
shift || true
export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1}
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}
repeat=${PMR_APP_REPEAT:-5}
for program in pmr-stencil3d pmr-stencil2d-c; do
  if [ ! -x "$build/examples/$program" ]; then
    echo "app-bench: $build/examples/$program is missing (cmake --build $build --target $program)" >&2
    exit 1
  fi
done
launcher=(mpirun)
if mpirun --version 2>/dev/null | grep -q "Open MPI"; then
  launcher+=(--oversubscribe)
fi

printf "%-10s %5s %12s %10s %10s %8s %12s %12s\n" example ranks "cells/rank" "MPI ms" "pmr ms" \
  "MPI/pmr" "exch % MPI" "exch % pmr"
for ranks in 2 4 8; do
  # 3D: 6 packed faces of n^3 boxes; iterations chosen for some 50-500 ms per solve.
  for n in 8 16 32 64; do
    iterations=$((n <= 16 ? 2000 : (n == 32 ? 400 : 60)))
    line=$("${launcher[@]}" "$@" -np "$ranks" "$build/examples/pmr-stencil3d" --size "$n" \
      --iterations "$iterations" --repeat "$repeat" --periodic 1 --csv | tail -1)
    IFS=, read -r _ r cells _ mpi pmr ratio mshare pshare equal <<< "$line"
    [ "$equal" = 1 ] || { echo "app-bench: stencil3d results differ" >&2; exit 1; }
    printf "%-10s %5s %12s %10.4f %10.4f %8.2f %12.0f %12.0f\n" stencil3d "$r" "$cells" "$mpi" \
      "$pmr" "$ratio" "$(awk "BEGIN{print $mshare * 100}")" "$(awk "BEGIN{print $pshare * 100}")"
  done
  # 2D: rows and columns of n^2 boxes (halos of n doubles: 512 B to 8 KiB).
  for n in 64 256 1024; do
    iterations=$((n == 64 ? 5000 : (n == 256 ? 1000 : 100)))
    out=$("${launcher[@]}" "$@" -np "$ranks" "$build/examples/pmr-stencil2d-c" --size "$n" \
      --iterations "$iterations" --repeat "$repeat" --periodic 0)
    grep -q "bitwise equal" <<< "$out" || { echo "app-bench: stencil2d results differ" >&2; exit 1; }
    mpi=$(sed -n 's/.*MPI persistent: \([0-9.]*\) s.*/\1/p' <<< "$out")
    pmr=$(sed -n 's/.*pmr: \([0-9.]*\) s.*/\1/p' <<< "$out")
    mshare=$(sed -n 's/.*: MPI \([0-9.]*\) %.*/\1/p' <<< "$out")
    pshare=$(sed -n 's/.*, pmr \([0-9.]*\) %.*/\1/p' <<< "$out")
    printf "%-10s %5s %12s %10.4f %10.4f %8.2f %12.0f %12.0f\n" stencil2d "$ranks" "${n}x${n}" \
      "$(awk "BEGIN{print $mpi * 1000 / $iterations}")" "$(awk "BEGIN{print $pmr * 1000 / $iterations}")" \
      "$(awk "BEGIN{print $mpi / $pmr}")" "$mshare" "$pshare"
  done
done
