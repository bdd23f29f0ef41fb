#!/usr/bin/env bash
# The main job: install dependencies, build pmr, and on local ranks (shared memory) run a 4D halo
# exchange demo and the halo-exchange benchmark against MPI, in one command.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cmake -S . -B build-release -G Ninja -DCMAKE_BUILD_TYPE=Release -DPMR_BUILD_TESTS=OFF >/dev/null
cmake --build build-release -j"$(nproc)"
mpirun=(mpirun --oversubscribe --bind-to none)

echo
echo "=== Lattice-QCD style 4D halo exchange (examples/halo4d), 2 ranks, shared memory ==="
"${mpirun[@]}" -np 2 build-release/examples/pmr-halo4d
echo
echo "=== Halo exchange, pmr vs MPI in the same run (pmr-bench exchange), 2 ranks ==="
"${mpirun[@]}" -np 2 --mca pml ob1 --mca btl vader,self --mca btl_vader_single_copy_mechanism cma \
  build-release/benchmarks/pmr-bench exchange --dims 1 --geom 2 --periodic
