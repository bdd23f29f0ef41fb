/* SPDX-License-Identifier: MIT */
/* An ordinary MPI program (no pmr in sight): a 1D periodic halo exchange with persistent requests,
 * then with Isend/Irecv, then Sendrecv, and a global sum, every value checked. Run it plain and
 * under pmr-run: the output must be the same, and under pmr-run the carried traffic makes no MPI
 * call of the interposer's own in the steady state. */
#include <mpi.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned long long own_calls(void) {
    unsigned long long (*f)(void) =
        (unsigned long long (*)(void))dlsym(RTLD_DEFAULT, "pmr_mpi_own_calls");
    return f ? f() : 0;
}

static int check(const double* v, int n, double expect, const char* what, int it) {
    for (int i = 0; i < n; ++i) {
        if (v[i] != expect + i) {
            fprintf(stderr, "%s: iteration %d element %d is %g, expected %g\n", what, it, i, v[i],
                    expect + i);
            return 1;
        }
    }
    return 0;
}

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int n = argc > 1 ? atoi(argv[1]) : 16;
    int iterations = argc > 2 ? atoi(argv[2]) : 200;
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    int up = (rank + 1) % size, down = (rank + size - 1) % size;
    double* sup = malloc(sizeof(double) * n);
    double* sdown = malloc(sizeof(double) * n);
    double* rup = malloc(sizeof(double) * n);
    double* rdown = malloc(sizeof(double) * n);
    MPI_Request req[4];
    MPI_Recv_init(rdown, n, MPI_DOUBLE, down, 1, comm, &req[0]);
    MPI_Recv_init(rup, n, MPI_DOUBLE, up, 2, comm, &req[1]);
    MPI_Send_init(sup, n, MPI_DOUBLE, up, 1, comm, &req[2]);
    MPI_Send_init(sdown, n, MPI_DOUBLE, down, 2, comm, &req[3]);
    int errors = 0;
    unsigned long long calls_before = 0;
    for (int it = 0; it < iterations; ++it) {
        if (it == iterations / 2) {
            calls_before = own_calls();
        }
        for (int i = 0; i < n; ++i) {
            sup[i] = 1000.0 * rank + it + i;
            sdown[i] = -1000.0 * rank - it + i;
        }
        MPI_Startall(4, req);
        MPI_Status st[4];
        MPI_Waitall(4, req, st);
        errors += check(rdown, n, 1000.0 * down + it, "persistent from below", it);
        errors += check(rup, n, -1000.0 * up - it, "persistent from above", it);
        if (st[0].MPI_SOURCE != down || st[0].MPI_TAG != 1) {
            fprintf(stderr, "bad status source %d tag %d\n", st[0].MPI_SOURCE, st[0].MPI_TAG);
            ++errors;
        }
        int count = -1;
        MPI_Get_count(&st[1], MPI_DOUBLE, &count);
        if (count != n) {
            fprintf(stderr, "bad count %d\n", count);
            ++errors;
        }
    }
    unsigned long long steady = own_calls() - calls_before;
    for (int k = 0; k < 4; ++k) {
        MPI_Request_free(&req[k]);
    }
    /* Plain non-blocking exchange with new buffers every time. */
    for (int it = 0; it < iterations; ++it) {
        double* a = malloc(sizeof(double) * n);
        double* b = malloc(sizeof(double) * n);
        for (int i = 0; i < n; ++i) {
            sup[i] = 7.0 * rank + it + i;
        }
        MPI_Request r[2];
        MPI_Irecv(a, n, MPI_DOUBLE, down, 3, comm, &r[0]);
        MPI_Isend(sup, n, MPI_DOUBLE, up, 3, comm, &r[1]);
        MPI_Waitall(2, r, MPI_STATUSES_IGNORE);
        errors += check(a, n, 7.0 * down + it, "isend/irecv", it);
        MPI_Sendrecv(sup, n, MPI_DOUBLE, up, 4, b, n, MPI_DOUBLE, down, 4, comm, MPI_STATUS_IGNORE);
        errors += check(b, n, 7.0 * down + it, "sendrecv", it);
        free(a);
        free(b);
    }
    double sum = 0;
    for (int it = 0; it < iterations; ++it) {
        double x = rank + 0.5 * it;
        MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_DOUBLE, MPI_SUM, comm);
        double expect = size * (size - 1) / 2.0 + size * 0.5 * it;
        if (x != expect) {
            fprintf(stderr, "allreduce %d: %g expected %g\n", it, x, expect);
            ++errors;
        }
        sum += x;
        MPI_Barrier(comm);
    }
    /* PMR_EXPECT_CARRIED=1 (the test under pmr-run): the halo must have been carried and its
     * steady state must have made no MPI call of the interposer's own. */
    const char* expect = getenv("PMR_EXPECT_CARRIED");
    if (expect != NULL && strcmp(expect, "1") == 0) {
        int (*enabled)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "pmr_mpi_enabled");
        unsigned long long (*carried)(void) =
            (unsigned long long (*)(void))dlsym(RTLD_DEFAULT, "pmr_mpi_carried_messages");
        if (enabled == NULL || carried == NULL || !enabled()) {
            fprintf(stderr, "rank %d: libpmr-mpi is not loaded or not enabled\n", rank);
            ++errors;
        } else if (carried() < (unsigned long long)iterations) {
            fprintf(stderr, "rank %d: only %llu messages carried\n", rank, carried());
            ++errors;
        }
        if (steady != 0) {
            fprintf(stderr, "rank %d: %llu MPI calls in the steady state\n", rank, steady);
            ++errors;
        }
    }
    int all = 0;
    MPI_Allreduce(&errors, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("halo_ring: %d ranks, %d doubles, %d iterations, checksum %.17g, %d errors\n", size,
               n, iterations, sum, all);
        printf("halo_ring: interposer MPI calls in the persistent steady state: %llu\n", steady);
    }
    MPI_Comm_free(&comm);
    free(sup);
    free(sdown);
    free(rup);
    free(rdown);
    MPI_Finalize();
    return all == 0 ? 0 : 1;
}
