// SPDX-License-Identifier: MIT
// Catch2 runner for multi-rank tests: initialises MPI, runs the same tests on every rank, and
// combines the verdict so that a failure on any rank fails the run on all of them. Ranks other than
// 0 only print when they fail.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <mpi.h>

#include <cstdio>
#include <string>
#include <vector>

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int rank = 0;
    int size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    Catch::Session session;
    std::vector<char*> args(argv, argv + argc);
    std::string quiet = "--reporter=compact";
    if (rank != 0) {
        args.push_back(quiet.data());
    }
    int failed = session.applyCommandLine(static_cast<int>(args.size()), args.data());
    if (failed == 0) {
        failed = session.run();
    }

    int local_failed = failed != 0 ? 1 : 0;
    int ranks_failed = 0;
    MPI_Allreduce(&local_failed, &ranks_failed, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        std::printf("pmr tests on %d rank(s): %s (%d rank(s) failed)\n", size,
                    ranks_failed == 0 ? "all passed" : "FAILED", ranks_failed);
    }
    MPI_Finalize();
    return ranks_failed == 0 ? 0 : 1;
}
