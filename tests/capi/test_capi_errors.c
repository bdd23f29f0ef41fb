/* SPDX-License-Identifier: MIT */
/* Errors between two ranks through the C interface: each case gives its code on the ranks
 * involved, with a message that names the sizes, the peer and what to do, never a hang or a write
 * outside a receive window. Compiled as C99; runs on exactly 2 ranks. */
#define _POSIX_C_SOURCE 200809L

#include "check.h"

#include <pmr/pmr.h>

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { guard = 0xA5 };

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Rank 0 sends 100 B to rank 1, which only offers 64 B inside a guarded buffer: PMR_ERR_SIZE on
 * both sides at the first init, and nothing written around the receive buffer. */
static void test_size_mismatch(int me, int peer) {
    pmr_connection c = NULL;
    pmr_send_window s = NULL;
    pmr_recv_window r = NULL;
    unsigned char memory[64 + 2 * 64];
    size_t i;
    memset(memory, guard, sizeof memory);
    CHECK_OK(pmr_connection_create(MPI_COMM_WORLD, peer, 20, 20, &c));
    CHECK_OK(pmr_send_window_create(c, NULL, me == 0 ? 100 : 64, &s));
    CHECK_OK(pmr_recv_window_create(c, memory + 64, 64, &r));
    MPI_Barrier(MPI_COMM_WORLD); /* both sides exist: only the size can fail below */
    if (me == 0) {
        CHECK_ERROR(pmr_send_window_init(s), PMR_ERR_SIZE, "100 B", "64 B");
        CHECK(strstr(pmr_last_error(), "peer 1") != NULL);
    } else {
        CHECK_ERROR(pmr_recv_window_init(r), PMR_ERR_SIZE, "larger than the peer's receive window",
                    "peer 0");
    }
    for (i = 0; i < sizeof memory; ++i) {
        if (i < 64 || i >= 128) {
            CHECK(memory[i] == guard);
        }
    }
    CHECK_OK(pmr_send_window_destroy(&s));
    CHECK_OK(pmr_recv_window_destroy(&r));
    CHECK_OK(pmr_connection_destroy(&c));
    MPI_Barrier(MPI_COMM_WORLD);
}

/* A post larger than the peer's (smaller) receive window: PMR_ERR_SIZE at the sender. */
static void test_post_beyond_peer(int me, int peer) {
    pmr_connection c = NULL;
    pmr_send_window s = NULL;
    pmr_recv_window r = NULL;
    CHECK_OK(pmr_connection_create(MPI_COMM_WORLD, peer, 21, 21, &c));
    /* Rank 0 sends 50 B into 80 B, rank 1 80 B into 80 B. */
    CHECK_OK(pmr_send_window_create(c, NULL, me == 0 ? 50 : 80, &s));
    CHECK_OK(pmr_recv_window_create(c, NULL, 80, &r));
    CHECK_OK(pmr_recv_window_init(r));
    CHECK_OK(pmr_send_window_init(s));
    CHECK_ERROR(pmr_send_window_post(s, me == 0 ? 51 : 81), PMR_ERR_SIZE, "exceeds", NULL);
    CHECK_OK(pmr_send_window_post(s, me == 0 ? 50 : 80));
    CHECK_OK(pmr_recv_window_post(r));
    CHECK_OK(pmr_send_window_wait(s));
    CHECK_OK(pmr_recv_window_wait(r));
    {
        size_t received = 0;
        CHECK_OK(pmr_recv_window_received_bytes(r, &received));
        CHECK(received == (me == 0 ? 80u : 50u));
    }
    CHECK_OK(pmr_send_window_destroy(&s));
    CHECK_OK(pmr_recv_window_destroy(&r));
    CHECK_OK(pmr_connection_destroy(&c));
    MPI_Barrier(MPI_COMM_WORLD);
}

/* A peer that never creates the matching window: PMR_ERR_TIMEOUT (PMR_TIMEOUT is 2 s here). */
static void test_missing_window(int me, int peer) {
    pmr_connection c = NULL;
    pmr_send_window s = NULL;
    CHECK_OK(pmr_connection_create(MPI_COMM_WORLD, peer, 22, 22, &c));
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK_OK(pmr_connection_establish(c));
    if (me == 0) {
        const double start = now();
        CHECK_OK(pmr_send_window_create(c, NULL, 40, &s));
        CHECK_ERROR(pmr_send_window_init(s), PMR_ERR_TIMEOUT, "send window #0", "peer 1");
        CHECK(now() - start < 10.0);
        CHECK_OK(pmr_send_window_destroy(&s));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK_OK(pmr_connection_destroy(&c));
}

/* A peer that destroys its receive window while we wait for it: PMR_ERR_PEER_LOST. */
static void test_window_destroyed(int me, int peer) {
    pmr_connection c = NULL;
    pmr_send_window s = NULL;
    pmr_recv_window r = NULL;
    CHECK_OK(pmr_connection_create(MPI_COMM_WORLD, peer, 23, 23, &c));
    /* One direction only: rank 0 sends 4 KiB (above the inline size: it needs the receiver's
     * buffer) to rank 1. */
    if (me == 0) {
        CHECK_OK(pmr_send_window_create(c, NULL, 4096, &s));
    } else {
        CHECK_OK(pmr_recv_window_create(c, NULL, 4096, &r));
    }
    if (me == 0) {
        CHECK_OK(pmr_send_window_init(s));
        CHECK_OK(pmr_send_window_post(s, 4096));
        CHECK_OK(pmr_send_window_wait(s));
    } else {
        CHECK_OK(pmr_recv_window_init(r));
        CHECK_OK(pmr_recv_window_post(r));
        CHECK_OK(pmr_recv_window_wait(r));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (me == 1) {
        CHECK_OK(pmr_recv_window_destroy(&r)); /* no second init: the sender would wait forever */
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (me == 0) {
        /* The loss is noticed by the first call that looks at the peer's window: init, post or
         * wait, whichever comes after the news arrived. */
        int rc = pmr_send_window_init(s);
        if (rc == PMR_SUCCESS) {
            rc = pmr_send_window_post(s, 4096);
        }
        if (rc == PMR_SUCCESS) {
            rc = pmr_send_window_wait(s);
        }
        CHECK_ERROR(rc, PMR_ERR_PEER_LOST, "destroyed", "peer 1");
        CHECK_OK(pmr_send_window_destroy(&s));
    }
    CHECK_OK(pmr_connection_destroy(&c));
    MPI_Barrier(MPI_COMM_WORLD);
}

/* Run with `provider` and PMR_PROVIDER=verbs on a host without an RDMA device: a native failure
 * of the forced provider is PMR_ERR_PROVIDER on both ranks, with what to do. */
static void test_provider_error(int peer) {
    pmr_connection c = (pmr_connection)&c; /* garbage that a failed create must reset */
    CHECK_ERROR(pmr_connection_create(MPI_COMM_WORLD, peer, 40, 40, &c), PMR_ERR_PROVIDER,
                "no RDMA device", "PMR_PROVIDER=verbs");
    CHECK(c == NULL);
}

int main(int argc, char** argv) {
    int me = 0;
    int size = 0;
    int code;
    /* Short deadline for the cases that must time out; set before pmr reads its settings. */
    setenv("PMR_TIMEOUT", "2", 1);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc > 1 && strcmp(argv[1], "provider") == 0) {
        if (CHECK(size == 2)) {
            test_provider_error(1 - me);
        }
    } else if (CHECK(size == 2)) {
        test_size_mismatch(me, 1 - me);
        test_post_beyond_peer(me, 1 - me);
        test_missing_window(me, 1 - me);
        test_window_destroyed(me, 1 - me);
    }
    code = check_finish("test_capi_errors");
    MPI_Finalize();
    return code;
}
