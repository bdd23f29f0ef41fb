// SPDX-License-Identifier: MIT
// pmr-bench-micro: Google Benchmark over pmr's single-process hot path. pmr needs MPI (targets name
// ranks of a communicator), so MPI is initialised around the benchmark run; a plain
// `./pmr-bench-micro` works as an MPI singleton.
#include <benchmark/benchmark.h>

#include <mpi.h>

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) {
        MPI_Finalize();
        return 1;
    }
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    MPI_Finalize();
    return 0;
}
