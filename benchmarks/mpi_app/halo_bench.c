/* SPDX-License-Identifier: MIT */
/* An ordinary MPI benchmark, the kind of code pmr-run is for: a periodic 1D halo exchange with
 * both neighbours (persistent requests, or Irecv/Isend/Waitall with the same buffers) and an 8 B
 * MPI_Allreduce, timed per size. It knows nothing of pmr; scripts/bench-interposer.sh runs it
 * with and without pmr-run and prints the ratios.
 *   mpirun -np N halo_bench [--sizes 8,4096,...] [--samples 5] [--seconds 0.05]
 *                           [--patterns persistent,isend,allreduce]
 * Output, on rank 0, one line per measurement: "pattern bytes microseconds-per-round". */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int compare(const void* a, const void* b) {
    double x = *(const double*)a, y = *(const double*)b;
    return x < y ? -1 : x > y;
}

static int rank, size, up, down;

/* One round of the pattern; returns 0 or an error count from the data check. */
static int round_persistent(MPI_Request* req, double* send, double* recv, int n, int check) {
    (void)send;
    MPI_Startall(4, req);
    MPI_Waitall(4, req, MPI_STATUSES_IGNORE);
    return check && n > 0 && (recv[0] != down || recv[n + n - 1] != up);
}

/* Tags of their own per size, as a code's phases with different halos would have. */
static int round_isend(double* send, double* recv, int n, int tag, int check) {
    MPI_Request req[4];
    MPI_Irecv(recv, n, MPI_DOUBLE, down, tag, MPI_COMM_WORLD, &req[0]);
    MPI_Irecv(recv + n, n, MPI_DOUBLE, up, tag + 1, MPI_COMM_WORLD, &req[1]);
    MPI_Isend(send, n, MPI_DOUBLE, up, tag, MPI_COMM_WORLD, &req[2]);
    MPI_Isend(send + n, n, MPI_DOUBLE, down, tag + 1, MPI_COMM_WORLD, &req[3]);
    MPI_Waitall(4, req, MPI_STATUSES_IGNORE);
    return check && n > 0 && (recv[0] != down || recv[n + n - 1] != up);
}

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    up = (rank + 1) % size;
    down = (rank + size - 1) % size;
    long sizes[32] = {8, 64, 512, 4096, 32768, 65536, 262144, 1048576, 4194304, 16777216};
    int nsizes = 10, samples = 5;
    double seconds = 0.05;
    int run[3] = {1, 1, 1}; /* persistent, isend, allreduce */
    for (int i = 1; i < argc; ++i) {
        if (strcmp(argv[i], "--sizes") == 0 && i + 1 < argc) {
            nsizes = 0;
            for (char* t = strtok(argv[++i], ","); t && nsizes < 32; t = strtok(NULL, ",")) {
                char* end;
                long v = strtol(t, &end, 10);
                v *= *end == 'K' || *end == 'k' ? 1024 : *end == 'M' || *end == 'm' ? 1048576 : 1;
                sizes[nsizes++] = v;
            }
        } else if (strcmp(argv[i], "--samples") == 0 && i + 1 < argc) {
            samples = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--patterns") == 0 && i + 1 < argc) {
            const char* list = argv[++i];
            run[0] = strstr(list, "persistent") != NULL;
            run[1] = strstr(list, "isend") != NULL;
            run[2] = strstr(list, "allreduce") != NULL;
        } else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
            seconds = atof(argv[++i]);
        }
    }
    int errors = 0;
    double* times = malloc(sizeof(double) * (size_t)samples);
    for (int s = 0; s < nsizes; ++s) {
        int n = (int)(sizes[s] / (long)sizeof(double));
        if (n < 1) {
            n = 1;
        }
        double* send = malloc(sizeof(double) * 2 * (size_t)n);
        double* recv = malloc(sizeof(double) * 2 * (size_t)n);
        for (int i = 0; i < 2 * n; ++i) {
            send[i] = rank;
        }
        MPI_Request req[4];
        const int tag = 10 * s + 3;
        MPI_Recv_init(recv, n, MPI_DOUBLE, down, tag, MPI_COMM_WORLD, &req[0]);
        MPI_Recv_init(recv + n, n, MPI_DOUBLE, up, tag + 1, MPI_COMM_WORLD, &req[1]);
        MPI_Send_init(send, n, MPI_DOUBLE, up, tag, MPI_COMM_WORLD, &req[2]);
        MPI_Send_init(send + n, n, MPI_DOUBLE, down, tag + 1, MPI_COMM_WORLD, &req[3]);
        /* The global sum first (once, at the first size), so that every size of the exchange is
         * measured in the same state: after the same million global sums. */
        for (int step = 0; step < 3; ++step) {
            const int pattern = (step + 2) % 3;
            if (!run[pattern] || (pattern == 2 && s != 0)) {
                continue;
            }
            /* Warm-up (and, under pmr-run, the switch of the streams to pmr), then the number of
             * rounds that takes about `seconds`, agreed by all ranks. */
            int rounds = 16;
            for (;;) {
                MPI_Barrier(MPI_COMM_WORLD);
                double t0 = MPI_Wtime();
                for (int r = 0; r < rounds; ++r) {
                    if (pattern == 0) {
                        errors += round_persistent(req, send, recv, n, 1);
                    } else if (pattern == 1) {
                        errors += round_isend(send, recv, n, 10 * s + 1, 1);
                    } else {
                        double x = rank;
                        MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
                        errors += x != size * (size - 1) / 2.0;
                    }
                }
                double t = MPI_Wtime() - t0;
                MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
                if (t > seconds / 4 || rounds >= (1 << 22)) {
                    rounds = (int)(rounds * seconds / (t > 1e-9 ? t : 1e-9)) + 1;
                    break;
                }
                rounds *= 4;
            }
            for (int k = 0; k < samples; ++k) {
                MPI_Barrier(MPI_COMM_WORLD);
                double t0 = MPI_Wtime();
                for (int r = 0; r < rounds; ++r) {
                    if (pattern == 0) {
                        errors += round_persistent(req, send, recv, n, 0);
                    } else if (pattern == 1) {
                        errors += round_isend(send, recv, n, 10 * s + 1, 0);
                    } else {
                        double x = rank;
                        MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
                    }
                }
                double t = (MPI_Wtime() - t0) / rounds;
                MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
                times[k] = t;
            }
            qsort(times, (size_t)samples, sizeof(double), compare);
            if (rank == 0 && (pattern < 2 || s == 0)) {
                const char* name = pattern == 0   ? "persistent"
                                   : pattern == 1 ? "isend"
                                                  : "allreduce";
                printf("%s %ld %.3f\n", name, pattern == 2 ? 8L : sizes[s],
                       times[samples / 2] * 1e6);
                fflush(stdout);
            }
        }
        for (int k = 0; k < 4; ++k) {
            MPI_Request_free(&req[k]);
        }
        free(send);
        free(recv);
    }
    int all = 0;
    MPI_Allreduce(&errors, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0 && all != 0) {
        printf("WRONG RESULTS: %d\n", all);
    }
    free(times);
    MPI_Finalize();
    return all == 0 ? 0 : 1;
}
