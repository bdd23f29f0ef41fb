// SPDX-License-Identifier: MIT
// Catch2 runner for multi-rank tests: initialises MPI, runs the same tests on every rank, and
// combines the verdict so that a failure on any rank fails the run on all of them. Ranks other than
// 0 only print when they fail.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

int main(int argc, char** argv) {
    // Funneled: threads of the tests run pmr's data path, which never calls MPI.
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    // PMR_TEST_SETENV="NAME=value NAME=value": set now, after MPI_Init, so that they reach pmr
    // (the UCX_* variables of its UCX contexts) but not an MPI that reads them in MPI_Init.
    if (const char* late = std::getenv("PMR_TEST_SETENV")) {
        std::istringstream words(late);
        for (std::string word; words >> word;) {
            const auto equals = word.find('=');
            if (equals != std::string::npos) {
                setenv(word.substr(0, equals).c_str(), word.substr(equals + 1).c_str(), 1);
            }
        }
    }
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
    // A test filter (a tag, a name) that selects nothing fails the run instead of passing it empty:
    // a renamed tag must not turn a CTest variant into a no-op.
    std::string warn = "--warn";
    std::string no_tests = "NoTests";
    args.push_back(warn.data());
    args.push_back(no_tests.data());
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
