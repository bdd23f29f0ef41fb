/* SPDX-License-Identifier: MIT */
/* A small harness for the C tests (the Catch2 runner is C++): CHECK and CHECK_RC record a failure
 * with rank, file and line and go on; check_finish() combines the verdict over all ranks, so that
 * a failure on any rank fails the run (exit code 1) on every rank. */
#ifndef PMR_TEST_CHECK_H
#define PMR_TEST_CHECK_H

#include <pmr/pmr.h>

#include <mpi.h>
#include <stdio.h>
#include <string.h>

static int check_failures = 0;
static int check_count = 0;

static inline int check_world_rank(void) {
    int initialized = 0;
    int rank = -1;
    MPI_Initialized(&initialized);
    if (initialized) {
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    }
    return rank;
}

static inline int check_true(int ok, const char* text, const char* file, int line) {
    ++check_count;
    if (!ok) {
        ++check_failures;
        fprintf(stderr, "FAILED on rank %d at %s:%d: %s\n", check_world_rank(), file, line, text);
    }
    return ok;
}

/* rc must be `expected`; on a failure both codes and the last error message are printed. */
static inline int check_rc(int rc, int expected, const char* call, const char* file, int line) {
    ++check_count;
    if (rc != expected) {
        ++check_failures;
        fprintf(stderr,
                "FAILED on rank %d at %s:%d: %s returned %s, expected %s (last error: %s)\n",
                check_world_rank(), file, line, call, pmr_error_name(rc), pmr_error_name(expected),
                pmr_last_error());
        return 0;
    }
    return 1;
}

/* rc must be the error `expected`, and pmr_last_error() must contain each of up to two texts. */
static inline int check_error(int rc, int expected, const char* text1, const char* text2,
                              const char* call, const char* file, int line) {
    int ok = check_rc(rc, expected, call, file, line);
    const char* texts[2] = {text1, text2};
    int i;
    for (i = 0; ok && i < 2; ++i) {
        if (texts[i] != NULL && strstr(pmr_last_error(), texts[i]) == NULL) {
            ++check_failures;
            ok = 0;
            fprintf(stderr, "FAILED on rank %d at %s:%d: the message of %s lacks \"%s\": %s\n",
                    check_world_rank(), file, line, call, texts[i], pmr_last_error());
        }
    }
    return ok;
}

#define CHECK(condition) check_true((condition) != 0, #condition, __FILE__, __LINE__)
#define CHECK_OK(call) check_rc((call), PMR_SUCCESS, #call, __FILE__, __LINE__)
#define CHECK_RC(call, expected) check_rc((call), (expected), #call, __FILE__, __LINE__)
#define CHECK_ERROR(call, expected, text1, text2)                                                  \
    check_error((call), (expected), (text1), (text2), #call, __FILE__, __LINE__)

/* Combines the verdict over MPI_COMM_WORLD; returns the exit code of the test program. */
static inline int check_finish(const char* name) {
    int local = check_failures > 0 ? 1 : 0;
    int failed = 0;
    int rank = 0;
    int size = 0;
    MPI_Allreduce(&local, &failed, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank == 0) {
        printf("%s on %d rank(s): %s (%d rank(s) failed, %d checks on rank 0)\n", name, size,
               failed == 0 ? "all passed" : "FAILED", failed, check_count);
    }
    return failed == 0 ? 0 : 1;
}

#endif
