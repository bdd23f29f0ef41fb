/* SPDX-License-Identifier: MIT */
/* The harness of the QMP tests (C, like the codes that use QMP): CHECK records a failure with
 * node, file and line and goes on; CHECK_RC compares a QMP status and prints QMP's error text;
 * check_finish() combines the verdict over all nodes (through MPI, not through the library under
 * test), so a failure on any node fails every node. */
#ifndef PMR_TEST_QMP_CHECK_H
#define PMR_TEST_QMP_CHECK_H

#include <qmp.h>

#include <mpi.h>
#include <stdio.h>

static int check_failures = 0;
static int check_count = 0;

static inline int check_rank(void) {
    int initialized = 0;
    int finalized = 0;
    int rank = -1;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (initialized && !finalized) {
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    }
    return rank;
}

static inline int check_true(int ok, const char* text, const char* file, int line) {
    ++check_count;
    if (!ok) {
        ++check_failures;
        fprintf(stderr, "FAILED on node %d at %s:%d: %s\n", check_rank(), file, line, text);
    }
    return ok;
}

static inline int check_rc(QMP_status_t rc, QMP_status_t expected, const char* call,
                           const char* file, int line) {
    ++check_count;
    if (rc != expected) {
        ++check_failures;
        fprintf(stderr,
                "FAILED on node %d at %s:%d: %s returned %d (%s), expected %d (%s); last "
                "error: %s\n",
                check_rank(), file, line, call, (int)rc, QMP_error_string(rc), (int)expected,
                QMP_error_string(expected), QMP_get_error_string(NULL));
        return 0;
    }
    return 1;
}

#define CHECK(condition) check_true((condition) ? 1 : 0, #condition, __FILE__, __LINE__)
#define CHECK_RC(call, expected) check_rc((call), (expected), #call, __FILE__, __LINE__)
#define CHECK_OK(call) CHECK_RC(call, QMP_SUCCESS)

/* The verdict over all nodes: 0 if every check passed everywhere. */
static inline int check_finish(const char* name) {
    int failures = check_failures;
    int total = 0;
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (check_rank() == 0) {
        printf("%s: %d checks on node 0, %d failures on all nodes\n", name, check_count, total);
    }
    return total == 0 ? 0 : 1;
}

#endif
