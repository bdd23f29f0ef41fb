/* SPDX-License-Identifier: MIT */
/* A C program against an installed pmr: one byte window to the own rank. */
#include <pmr/pmr.h>

#include <mpi.h>
#include <stdio.h>

int main(int argc, char** argv) {
    int rank = 0;
    int value = 42;
    int received = 0;
    int ok;
    pmr_connection c = NULL;
    pmr_send_window s = NULL;
    pmr_recv_window r = NULL;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    ok = pmr_connection_create(MPI_COMM_WORLD, rank, 0, 0, &c) == PMR_SUCCESS &&
         pmr_send_window_create(c, &value, sizeof value, &s) == PMR_SUCCESS &&
         pmr_recv_window_create(c, &received, sizeof received, &r) == PMR_SUCCESS &&
         pmr_recv_window_init(r) == PMR_SUCCESS && pmr_send_window_init(s) == PMR_SUCCESS &&
         pmr_send_window_post(s, sizeof value) == PMR_SUCCESS &&
         pmr_recv_window_post(r) == PMR_SUCCESS && pmr_send_window_wait(s) == PMR_SUCCESS &&
         pmr_recv_window_wait(r) == PMR_SUCCESS;
    if (!ok) {
        fprintf(stderr, "C consumer: %s\n", pmr_last_error());
    }
    printf("C consumer: received %d\n", received);
    pmr_send_window_destroy(&s);
    pmr_recv_window_destroy(&r);
    pmr_connection_destroy(&c);
    MPI_Finalize();
    return ok && received == 42 ? 0 : 1;
}
