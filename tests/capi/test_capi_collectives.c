/* SPDX-License-Identifier: MIT */
/* Allreduce and barrier through the C interface, compiled as C99: a sum of doubles (exact small
 * integers) in a library-owned buffer and in place over a user buffer, a max of int64_t from
 * separate buffers, the algorithms (direct in a user buffer), test() polling; a barrier; and the
 * errors (an unknown datatype or algorithm, max of complex numbers, trinaryx3 on a communicator
 * without a 3D grid, NULL handles). */
#include "check.h"

#include <pmr/pmr.h>

#include <mpi.h>
#include <stdint.h>
#include <stdlib.h>

enum { count = 1000, rounds = 4 };

static void check_sum(const double* result, int size, int round) {
    int i;
    int wrong = 0;
    for (i = 0; i < count; ++i) {
        /* rank r contributes r + round + i % 3 */
        const double expected = size * (size - 1) / 2.0 + size * (double)(round + i % 3);
        if (result[i] != expected) {
            ++wrong;
        }
    }
    CHECK(wrong == 0);
}

int main(int argc, char** argv) {
    pmr_communicator comm = NULL;
    pmr_allreduce owned = NULL;
    pmr_allreduce in_place = NULL;
    pmr_allreduce maximum = NULL;
    pmr_allreduce direct = NULL;
    pmr_allreduce bad = NULL;
    pmr_barrier barrier = NULL;
    double user[count];
    double direct_in[count];
    double direct_out[count];
    int64_t in64[count];
    int64_t out64[count];
    int rank = 0;
    int size = 1;
    int round;
    int i;
    int code;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK_OK(pmr_communicator_create(MPI_COMM_WORLD, 0, NULL, NULL, 0, &comm));
    CHECK_OK(pmr_allreduce_create(comm, NULL, NULL, count, PMR_DOUBLE, PMR_SUM,
                                  PMR_ALLREDUCE_RECURSIVE_DOUBLING, PMR_ORDER_ALGORITHM, &owned));
    CHECK_OK(pmr_allreduce_create(comm, user, user, count, PMR_DOUBLE, PMR_SUM, PMR_ALLREDUCE_RING,
                                  PMR_ORDER_RANK, &in_place));
    CHECK_OK(pmr_allreduce_create(comm, in64, out64, count, PMR_INT64, PMR_MAX,
                                  PMR_ALLREDUCE_AUTOMATIC, PMR_ORDER_ALGORITHM, &maximum));
    CHECK_OK(pmr_allreduce_create(comm, direct_in, direct_out, count, PMR_DOUBLE, PMR_SUM,
                                  PMR_ALLREDUCE_DIRECT, PMR_ORDER_ALGORITHM, &direct));
    CHECK_OK(pmr_barrier_create(comm, &barrier));

    for (round = 0; round < rounds; ++round) {
        double* data = (double*)pmr_allreduce_data(owned);
        int done = 0;
        CHECK(data != NULL);
        for (i = 0; i < count; ++i) {
            data[i] = rank + round + i % 3;
            user[i] = rank + round + i % 3;
            direct_in[i] = rank + round + i % 3;
            in64[i] = (int64_t)(rank * 1000 + i) - round;
        }
        CHECK_OK(pmr_allreduce_run(owned));
        check_sum(data, size, round);
        CHECK_OK(pmr_allreduce_start(in_place));
        while (done == 0 && CHECK_OK(pmr_allreduce_test(in_place, &done))) {
        }
        check_sum(user, size, round);
        CHECK_OK(pmr_allreduce_start(direct));
        CHECK_OK(pmr_allreduce_wait(direct));
        check_sum(direct_out, size, round);
        CHECK(pmr_allreduce_data(in_place) == (void*)user);
        CHECK_OK(pmr_allreduce_run(maximum));
        for (i = 0; i < count; ++i) {
            if (out64[i] != (int64_t)((size - 1) * 1000 + i) - round) {
                CHECK(out64[i] == (int64_t)((size - 1) * 1000 + i) - round);
                break;
            }
        }
        CHECK_OK(pmr_barrier_run(barrier));
        CHECK_OK(pmr_barrier_start(barrier));
        done = 0;
        while (done == 0 && CHECK_OK(pmr_barrier_test(barrier, &done))) {
        }
    }

    CHECK_ERROR(pmr_allreduce_create(comm, NULL, NULL, 4, 17, PMR_SUM, PMR_ALLREDUCE_AUTOMATIC,
                                     PMR_ORDER_ALGORITHM, &bad),
                PMR_ERR_ARGUMENT, "datatype 17", NULL);
    CHECK(bad == NULL);
    CHECK_ERROR(pmr_allreduce_create(comm, NULL, NULL, 4, PMR_DOUBLE, PMR_SUM, 5,
                                     PMR_ORDER_ALGORITHM, &bad),
                PMR_ERR_ARGUMENT, "algorithm 5", NULL);
    CHECK_ERROR(pmr_allreduce_create(comm, NULL, NULL, 4, PMR_DOUBLE, PMR_SUM,
                                     PMR_ALLREDUCE_TRINARYX3, PMR_ORDER_ALGORITHM, &bad),
                PMR_ERR_ARGUMENT, "3D Cartesian", NULL);
    CHECK(bad == NULL);
    CHECK_ERROR(pmr_allreduce_create(comm, NULL, NULL, 4, PMR_COMPLEX_DOUBLE, PMR_MAX,
                                     PMR_ALLREDUCE_AUTOMATIC, PMR_ORDER_ALGORITHM, &bad),
                PMR_ERR_ARGUMENT, "max is not defined", NULL);
    CHECK_ERROR(pmr_allreduce_run(NULL), PMR_ERR_ARGUMENT, "allreduce handle is NULL", NULL);
    CHECK_ERROR(pmr_barrier_wait(barrier), PMR_ERR_USAGE, "without a run in flight", NULL);
    CHECK_ERROR(pmr_allreduce_wait(direct), PMR_ERR_USAGE, "without a run in flight", NULL);
    CHECK_ERROR(pmr_allreduce_wait(NULL), PMR_ERR_ARGUMENT, "allreduce handle is NULL", NULL);

    CHECK_OK(pmr_allreduce_destroy(&owned));
    CHECK_OK(pmr_allreduce_destroy(&in_place));
    CHECK_OK(pmr_allreduce_destroy(&maximum));
    CHECK_OK(pmr_allreduce_destroy(&direct));
    CHECK_OK(pmr_barrier_destroy(&barrier));
    CHECK(owned == NULL && barrier == NULL);
    CHECK_OK(pmr_communicator_destroy(&comm));
    code = check_finish("test_capi_collectives");
    MPI_Finalize();
    return code;
}
