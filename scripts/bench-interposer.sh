#!/usr/bin/env bash
# Measures what pmr-run does to an unmodified MPI program: benchmarks/mpi_app/halo_bench.c (a
# periodic 1D halo exchange with persistent requests and with Irecv/Isend, and an 8 B
# MPI_Allreduce) run alternately as is and under pmr-run, ROUNDS times each, on the same MPI
# configuration. Prints per size the median time of each and the speed-up (plain / pmr-run).
#   scripts/bench-interposer.sh [build-dir] [ranks] [mpirun options...]
#   e.g. scripts/bench-interposer.sh build-release 2 --bind-to core
#   scripts/bench-interposer.sh [build-dir] matrix
#     2, 4 and 8 ranks, each on Open MPI's two fastest shared-memory settings (UCX PML; ob1 with
#     vader and CMA) and over TCP (ob1 with the tcp BTL on loopback; pmr then forced onto its ucx
#     provider with UCX's TCP transport), with a last table of the best plain MPI time per size
#     against the best pmr-run time, over the shared-memory settings.
#   scripts/bench-interposer.sh [build-dir] petsc [ranks] [grid points per side]
#     tests/mpi/petsc/poisson.c (PETSc's CG on a DMDA, a fixed number of iterations) alternately
#     with and without pmr-run, solving PETSC_SOLVES (default 3) times per run as a time-stepping
#     code does: the first solve's time (it includes pmr-run's set-up) and, for the last solve,
#     the solve time and PETSc's -log_view times of the halo exchange (VecScatterBegin/End) and
#     the global sums (VecTDot, VecNorm), fastest of ROUNDS runs each.
# SIZES (default 8,64,512,4K,16K,64K,256K,1M,4M,16M) and ROUNDS (default 3) from the environment.
# Before each pair of runs it prints the machine's core-to-core state (pmr-probe-core-to-core).
set -euo pipefail
build=${1:-build-release}
ranks=${2:-2}
shift 2 || true
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
bench="$build/benchmarks/mpi-halo-bench"
run="$build/bin/pmr-run"
sizes=${SIZES:-8,64,512,4K,16K,64K,256K,1M,4M,16M}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# measure <name> <ranks> [mpirun options...]: ROUNDS alternating runs into $out/<name>.*
measure() {
  local name=$1 n=$2
  shift 2
  local oversubscribe=""
  if [ "$n" -gt "$(nproc)" ]; then
    oversubscribe="--oversubscribe"
  fi
  for r in $(seq "${ROUNDS:-3}"); do
    probe "$name run $r"
    mpirun $oversubscribe -np "$n" "$@" "$bench" --sizes "$sizes" > "$out/$name.plain.$r"
    mpirun $oversubscribe -np "$n" "$@" "$run" "$bench" --sizes "$sizes" > "$out/$name.pmr.$r"
  done
  probe "$name end"
}

# probe <what>: the machine's state on stderr (pmr-probe-core-to-core; see its source): compare
# only runs of the same state.
probe() {
  if [ -x "$build/benchmarks/pmr-probe-core-to-core" ]; then
    echo "$1: $("$build/benchmarks/pmr-probe-core-to-core" 200000)" >&2
  fi
}

# report <title> <name>... : one table; with several names, the best (lowest) median of them.
report() {
  python3 - "$out" "${ROUNDS:-3}" "$@" <<'PY'
import sys, statistics, collections
out, rounds, title, names = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
def load(name, kind):
    t = collections.defaultdict(list)
    for r in range(1, rounds + 1):
        for line in open(f"{out}/{name}.{kind}.{r}"):
            p = line.split()
            if len(p) == 3:
                t[(p[0], int(p[1]))].append(float(p[2]))
            elif line.startswith("WRONG"):
                sys.exit(f"{name} {kind} run {r}: {line.strip()}")
    return {k: statistics.median(v) for k, v in t.items()}
plain = [load(n, "plain") for n in names]
pmr = [load(n, "pmr") for n in names]
print(f"{title}: median of {rounds} alternating runs; time per round in us")
print(f"{'pattern':<11}{'bytes':>10}{'MPI':>12}{'pmr-run':>12}{'speed-up':>10}")
for key in sorted(plain[0], key=lambda k: (k[0], k[1])):
    a = min(p[key] for p in plain)
    b = min(p[key] for p in pmr)
    print(f"{key[0]:<11}{key[1]:>10}{a:>12.3f}{b:>12.3f}{a / b:>10.2f}")
print()
PY
}

ucx_pml=(--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any)
vader_cma=(--mca pml ob1 --mca btl vader,self --mca btl_vader_single_copy_mechanism cma)
tcp=(--mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include lo
     -x PMR_PROVIDER=ucx -x UCX_TLS=tcp -x UCX_NET_DEVICES=lo)

if [ "$ranks" = petsc ]; then
  n=${1:-2}
  points=${2:-32}
  program="$build/tests/mpi/interposer_petsc_poisson"
  oversubscribe=""
  if [ "$n" -gt "$(nproc)" ]; then
    oversubscribe="--oversubscribe"
  fi
  # A fixed number of CG iterations (no convergence test), long enough to time.
  options=(-n "$points" -solves "${PETSC_SOLVES:-3}" -ksp_type cg -pc_type jacobi -ksp_max_it "${PETSC_ITERATIONS:-1000}"
           -ksp_convergence_test skip -ksp_norm_type unpreconditioned -log_view)
  for r in $(seq "${ROUNDS:-3}"); do
    probe "petsc run $r"
    mpirun $oversubscribe -np "$n" "${vader_cma[@]}" "$program" "${options[@]}" \
      > "$out/petsc.plain.$r" 2>&1
    mpirun $oversubscribe -np "$n" "${vader_cma[@]}" "$run" "$program" "${options[@]}" \
      > "$out/petsc.pmr.$r" 2>&1
  done
  python3 - "$out" "${ROUNDS:-3}" "$n" "$points" <<'PY'
import sys
out, rounds, ranks, points = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
events = ["KSPSolve", "MatMult", "VecScatterBegin", "VecScatterEnd", "VecTDot", "VecNorm"]
def load(kind):
    best, answer = {}, None
    for r in range(1, rounds + 1):
        timed = False  # inside -log_view's table of the stage "Timed" (the last solve)
        for line in open(f"{out}/petsc.{kind}.{r}"):
            p = line.split()
            if line.startswith("iterations"):
                if answer is not None and answer != line.strip():
                    sys.exit(f"{kind}: runs differ: {answer} / {line.strip()}")
                answer = line.strip()
            elif line.startswith("solve time"):
                # solve time <last> s (first of <K>: <first> s)
                best["first solve"] = min(best.get("first solve", 1e30), float(p[7]))
            elif line.startswith("--- Event Stage"):
                timed = line.rstrip().endswith(": Timed")
            elif timed and p and p[0] in events and len(p) > 3:
                best[p[0]] = min(best.get(p[0], 1e30), float(p[3]))
    return best, answer
plain, a = load("plain")
pmr, b = load("pmr")
if a != b:
    sys.exit(f"results differ:\n  MPI:     {a}\n  pmr-run: {b}")
print(f"PETSc CG, {ranks} ranks, {points}x{points} grid, fastest of {rounds} runs; {a}")
print("first solve: includes pmr-run's set-up; the events: the last solve (log stage Timed)")
print(f"{'event':<17}{'MPI ms':>11}{'pmr-run ms':>11}{'speed-up':>10}")
for e in ["first solve"] + events:
    if e in plain and e in pmr:
        print(f"{e:<17}{plain[e] * 1e3:>11.3f}{pmr[e] * 1e3:>11.3f}{plain[e] / pmr[e]:>10.2f}")
PY
  exit 0
fi
if [ "$ranks" != matrix ]; then
  measure run "$ranks" "$@"
  report "$ranks ranks" run
  exit 0
fi
for n in 2 4 8; do
  measure "ucx$n" "$n" "${ucx_pml[@]}"
  report "$n ranks, UCX PML" "ucx$n"
  measure "vader$n" "$n" "${vader_cma[@]}"
  report "$n ranks, ob1 vader CMA" "vader$n"
  report "$n ranks, shared memory, best of both" "ucx$n" "vader$n"
  measure "tcp$n" "$n" "${tcp[@]}"
  report "$n ranks, TCP on loopback (MPI: ob1 tcp; pmr: ucx over TCP)" "tcp$n"
done
