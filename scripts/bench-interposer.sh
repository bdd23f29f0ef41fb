#!/usr/bin/env bash
# Measures what pmr-run does to an unmodified MPI program: benchmarks/mpi_app/halo_bench.c (a
# periodic 1D halo exchange with persistent requests and with Irecv/Isend, and an 8 B
# MPI_Allreduce) run alternately as is and under pmr-run, ROUNDS times each, on the same MPI
# configuration. Prints per size the median time of each and the speed-up (plain / pmr-run).
#   scripts/bench-interposer.sh [build-dir] [ranks] [mpirun options...]
#   e.g. scripts/bench-interposer.sh build-release 2 --bind-to core
# SIZES (default 8,64,512,4K,32K,64K,256K,1M,4M,16M) and ROUNDS (default 3) from the environment.
set -euo pipefail
build=${1:-build-release}
ranks=${2:-2}
shift 2 || true
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
bench="$build/benchmarks/mpi-halo-bench"
run="$build/bin/pmr-run"
sizes=${SIZES:-8,64,512,4K,32K,64K,256K,1M,4M,16M}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
oversubscribe=""
if [ "$ranks" -gt "$(nproc)" ]; then
  oversubscribe="--oversubscribe"
fi
for r in $(seq "${ROUNDS:-3}"); do
  mpirun $oversubscribe -np "$ranks" "$@" "$bench" --sizes "$sizes" > "$out/plain.$r"
  mpirun $oversubscribe -np "$ranks" "$@" "$run" "$bench" --sizes "$sizes" > "$out/pmr.$r"
done
python3 - "$out" "${ROUNDS:-3}" "$ranks" <<'PY'
import sys, statistics, collections
out, rounds, ranks = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def load(kind):
    t = collections.defaultdict(list)
    for r in range(1, rounds + 1):
        for line in open(f"{out}/{kind}.{r}"):
            p = line.split()
            if len(p) == 3:
                t[(p[0], int(p[1]))].append(float(p[2]))
            elif line.startswith("WRONG"):
                sys.exit(f"{kind} run {r}: {line.strip()}")
    return t
plain, pmr = load("plain"), load("pmr")
print(f"{ranks} ranks, median of {rounds} alternating runs; time per round in us")
print(f"{'pattern':<11}{'bytes':>10}{'MPI':>12}{'pmr-run':>12}{'speed-up':>10}")
for key in sorted(plain, key=lambda k: (k[0], k[1])):
    a, b = statistics.median(plain[key]), statistics.median(pmr[key])
    print(f"{key[0]:<11}{key[1]:>10}{a:>12.3f}{b:>12.3f}{a / b:>10.2f}")
PY
