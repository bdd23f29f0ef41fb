/* SPDX-License-Identifier: MIT */
/* The C interface in one process (connections to the own rank, MPI_PROC_NULL and MPI_COMM_SELF
 * grids): every call with bad handles, pointers and arguments, calls out of order, the codes and
 * messages they give, a failure before MPI_Init, the thread-local message, and transfers through
 * user and library-owned windows. Compiled as C99. Runs on any number of ranks. */
#define _POSIX_C_SOURCE 200809L

#include "check.h"

#include <pmr/pmr.h>

#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { guard = 0xA5 };

/* Fills `bytes` bytes with a pattern that depends on `seed`. */
static void fill(unsigned char* data, size_t bytes, unsigned seed) {
    size_t i;
    for (i = 0; i < bytes; ++i) {
        data[i] = (unsigned char)((i * 7u + seed * 13u + 1u) & 0xFFu);
    }
}

static int matches(const unsigned char* data, size_t bytes, unsigned seed) {
    size_t i;
    for (i = 0; i < bytes; ++i) {
        if (data[i] != (unsigned char)((i * 7u + seed * 13u + 1u) & 0xFFu)) {
            return 0;
        }
    }
    return 1;
}

static int all_equal(const unsigned char* data, size_t bytes, unsigned char value) {
    size_t i;
    for (i = 0; i < bytes; ++i) {
        if (data[i] != value) {
            return 0;
        }
    }
    return 1;
}

/* One full round of `bytes` bytes from s to r (a connection to the own process). */
static int round_trip(pmr_send_window s, pmr_recv_window r, size_t bytes) {
    return CHECK_OK(pmr_recv_window_init(r)) && CHECK_OK(pmr_send_window_init(s)) &&
           CHECK_OK(pmr_send_window_post(s, bytes)) && CHECK_OK(pmr_recv_window_post(r)) &&
           CHECK_OK(pmr_send_window_wait(s)) && CHECK_OK(pmr_recv_window_wait(r));
}

static void test_error_names(void) {
    const int codes[] = {PMR_SUCCESS,       PMR_ERR_USAGE,     PMR_ERR_ARGUMENT, PMR_ERR_SIZE,
                         PMR_ERR_PROVIDER,  PMR_ERR_BOOTSTRAP, PMR_ERR_TIMEOUT,  PMR_ERR_PEER_LOST,
                         PMR_ERR_NO_MEMORY, PMR_ERR_OTHER};
    const size_t n = sizeof codes / sizeof codes[0];
    size_t i;
    size_t j;
    CHECK(PMR_SUCCESS == 0);
    CHECK(strcmp(pmr_error_name(PMR_ERR_SIZE), "PMR_ERR_SIZE") == 0);
    CHECK(strcmp(pmr_error_name(PMR_ERR_PEER_LOST), "PMR_ERR_PEER_LOST") == 0);
    CHECK(strcmp(pmr_error_name(12345), "PMR_ERR_UNKNOWN") == 0);
    for (i = 0; i < n; ++i) {
        CHECK(strcmp(pmr_error_name(codes[i]), "PMR_ERR_UNKNOWN") != 0);
        for (j = i + 1; j < n; ++j) {
            CHECK(codes[i] != codes[j]);
            CHECK(strcmp(pmr_error_name(codes[i]), pmr_error_name(codes[j])) != 0);
        }
    }
}

/* Every entry point with a NULL handle: PMR_ERR_ARGUMENT naming the call, never a crash. */
static void test_null_handles(void) {
    pmr_connection c = NULL;
    pmr_send_window s = NULL;
    pmr_recv_window r = NULL;
    pmr_communicator g = NULL;
    size_t bytes = 0;
    int value = 0;
    char name[32];
    MPI_Comm comm = MPI_COMM_NULL;

    CHECK_ERROR(pmr_send_window_create(NULL, NULL, 8, &s), PMR_ERR_ARGUMENT,
                "connection handle is NULL", "pmr_send_window_create");
    CHECK(s == NULL);
    CHECK_ERROR(pmr_recv_window_create(NULL, NULL, 8, &r), PMR_ERR_ARGUMENT,
                "connection handle is NULL", "pmr_recv_window_create");
    CHECK(r == NULL);
    CHECK_ERROR(pmr_connection_establish(NULL), PMR_ERR_ARGUMENT, "NULL",
                "pmr_connection_establish");
    CHECK_ERROR(pmr_connection_provider(NULL, name, sizeof name), PMR_ERR_ARGUMENT, "NULL",
                "pmr_connection_provider");

    CHECK(pmr_send_window_data(NULL) == NULL);
    CHECK(strstr(pmr_last_error(), "pmr_send_window_data") != NULL);
    CHECK(pmr_recv_window_data(NULL) == NULL);
    CHECK(strstr(pmr_last_error(), "pmr_recv_window_data") != NULL);
    CHECK_ERROR(pmr_send_window_size(NULL, &bytes), PMR_ERR_ARGUMENT, "send_window handle",
                "pmr_send_window_size");
    CHECK_ERROR(pmr_recv_window_size(NULL, &bytes), PMR_ERR_ARGUMENT, "recv_window handle",
                "pmr_recv_window_size");
    CHECK_ERROR(pmr_send_window_init(NULL), PMR_ERR_ARGUMENT, "NULL", "pmr_send_window_init");
    CHECK_ERROR(pmr_send_window_post(NULL, 0), PMR_ERR_ARGUMENT, "NULL", "pmr_send_window_post");
    CHECK_ERROR(pmr_send_window_wait(NULL), PMR_ERR_ARGUMENT, "NULL", "pmr_send_window_wait");
    CHECK_ERROR(pmr_send_window_test(NULL, &value), PMR_ERR_ARGUMENT, "NULL",
                "pmr_send_window_test");
    CHECK_ERROR(pmr_recv_window_init(NULL), PMR_ERR_ARGUMENT, "NULL", "pmr_recv_window_init");
    CHECK_ERROR(pmr_recv_window_post(NULL), PMR_ERR_ARGUMENT, "NULL", "pmr_recv_window_post");
    CHECK_ERROR(pmr_recv_window_wait(NULL), PMR_ERR_ARGUMENT, "NULL", "pmr_recv_window_wait");
    CHECK_ERROR(pmr_recv_window_test(NULL, &value), PMR_ERR_ARGUMENT, "NULL",
                "pmr_recv_window_test");
    CHECK_ERROR(pmr_wait_all(&s, 1, NULL, 0), PMR_ERR_ARGUMENT, "send_window handle",
                "pmr_wait_all");
    CHECK_ERROR(pmr_test_all(NULL, 0, &r, 1, &value), PMR_ERR_ARGUMENT, "recv_window handle",
                "pmr_test_all");
    CHECK_ERROR(pmr_recv_window_received_bytes(NULL, &bytes), PMR_ERR_ARGUMENT, "NULL",
                "pmr_recv_window_received_bytes");

    CHECK_ERROR(pmr_communicator_comm(NULL, &comm), PMR_ERR_ARGUMENT, "communicator handle",
                "pmr_communicator_comm");
    CHECK_ERROR(pmr_communicator_rank(NULL, &value), PMR_ERR_ARGUMENT, "NULL",
                "pmr_communicator_rank");
    CHECK_ERROR(pmr_communicator_size(NULL, &value), PMR_ERR_ARGUMENT, "NULL",
                "pmr_communicator_size");
    CHECK_ERROR(pmr_communicator_dimensions(NULL, &value), PMR_ERR_ARGUMENT, "NULL",
                "pmr_communicator_dimensions");
    CHECK_ERROR(pmr_communicator_grid(NULL, 1, &value, NULL, NULL), PMR_ERR_ARGUMENT, "NULL",
                "pmr_communicator_grid");
    CHECK_ERROR(pmr_communicator_neighbor(NULL, 0, 1, &value), PMR_ERR_ARGUMENT, "NULL",
                "pmr_communicator_neighbor");
    CHECK_ERROR(pmr_connection_create_neighbor(NULL, 0, 1, 0, &c), PMR_ERR_ARGUMENT, "NULL",
                "pmr_connection_create_neighbor");
    CHECK(c == NULL);

    /* Destroying a NULL handle does nothing; a NULL pointer to the handle is an error. */
    CHECK_OK(pmr_connection_destroy(&c));
    CHECK_OK(pmr_send_window_destroy(&s));
    CHECK_OK(pmr_recv_window_destroy(&r));
    CHECK_OK(pmr_communicator_destroy(&g));
    CHECK_ERROR(pmr_connection_destroy(NULL), PMR_ERR_ARGUMENT, "output pointer",
                "pmr_connection_destroy");
    CHECK_ERROR(pmr_send_window_destroy(NULL), PMR_ERR_ARGUMENT, "NULL", "pmr_send_window_destroy");
    CHECK_ERROR(pmr_recv_window_destroy(NULL), PMR_ERR_ARGUMENT, "NULL", "pmr_recv_window_destroy");
    CHECK_ERROR(pmr_communicator_destroy(NULL), PMR_ERR_ARGUMENT, "NULL",
                "pmr_communicator_destroy");
}

static void test_bad_arguments(void) {
    int rank = 0;
    int size = 0;
    pmr_connection c = NULL;
    pmr_send_window s = NULL;
    size_t bytes = 0;
    int done = 0;
    char small[3];
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    CHECK_ERROR(pmr_connection_create(MPI_COMM_WORLD, rank, 0, 0, NULL), PMR_ERR_ARGUMENT,
                "`out` is NULL", "pmr_connection_create");
    c = (pmr_connection)&c; /* garbage that a failed create must reset */
    CHECK_ERROR(pmr_connection_create(MPI_COMM_WORLD, size + 5, 0, 0, &c), PMR_ERR_ARGUMENT,
                "is not in the communicator", "MPI_PROC_NULL");
    CHECK(c == NULL);
    CHECK_ERROR(pmr_connection_create(MPI_COMM_WORLD, rank, -1, 0, &c), PMR_ERR_ARGUMENT,
                "tag -1 is out of range", NULL);
    CHECK_ERROR(pmr_connection_create(MPI_COMM_NULL, 0, 0, 0, &c), PMR_ERR_ARGUMENT,
                "MPI_COMM_NULL", NULL);
    CHECK(c == NULL);

    if (!CHECK_OK(pmr_connection_create(MPI_COMM_WORLD, rank, 1, 1, &c))) {
        return;
    }
    CHECK_ERROR(pmr_send_window_create(c, NULL, 8, NULL), PMR_ERR_ARGUMENT, "`out` is NULL",
                "pmr_send_window_create");
    /* A library-owned window of 2^60 bytes: no address space holds it. */
    s = (pmr_send_window)&s;
    CHECK_ERROR(pmr_send_window_create(c, NULL, (size_t)1 << 60, &s), PMR_ERR_NO_MEMORY,
                "out of memory", "pmr_send_window_create");
    CHECK(s == NULL);
    CHECK_OK(pmr_send_window_create(c, NULL, 8, &s));
    CHECK_ERROR(pmr_send_window_size(s, NULL), PMR_ERR_ARGUMENT, "`bytes` is NULL", NULL);
    CHECK_ERROR(pmr_send_window_test(s, NULL), PMR_ERR_ARGUMENT, "`done` is NULL", NULL);
    CHECK_ERROR(pmr_connection_provider(c, NULL, 0), PMR_ERR_ARGUMENT, "`name` is NULL", NULL);
    CHECK_ERROR(pmr_connection_provider(c, small, sizeof small), PMR_ERR_SIZE, "needs 5 bytes",
                NULL);
    (void)bytes;
    (void)done;
    CHECK_OK(pmr_send_window_destroy(&s));
    CHECK_OK(pmr_connection_destroy(&c));
}

/* Windows over user buffers and library-owned memory on a connection to the own process. */
static void test_self_exchange(void) {
    enum { bytes = 1000 };
    int rank = 0;
    pmr_connection c = NULL;
    pmr_send_window s = NULL;
    pmr_recv_window r = NULL;
    pmr_send_window owned_s = NULL;
    pmr_recv_window owned_r = NULL;
    unsigned char send_buffer[bytes];
    unsigned char memory[bytes + 128];
    unsigned char* recv_buffer = memory + 64;
    size_t size = 0;
    size_t received = 0;
    char provider[32];
    unsigned round;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    memset(memory, guard, sizeof memory);

    /* Tags (2, 2) pair the connection with itself. */
    if (!CHECK_OK(pmr_connection_create(MPI_COMM_WORLD, rank, 2, 2, &c))) {
        return;
    }
    {
        /* Before the handshake: the provider is chosen already (self), the handshake not done. */
        int flag = -1;
        CHECK_OK(pmr_connection_established(c, &flag));
        CHECK(flag == 0);
        CHECK_OK(pmr_connection_chosen_provider(c, provider, sizeof provider, &flag));
        CHECK(flag == 1 && strcmp(provider, "self") == 0);
        CHECK_ERROR(pmr_connection_chosen_provider(c, provider, 2, &flag), PMR_ERR_SIZE, "self",
                    NULL);
        CHECK_ERROR(pmr_connection_established(c, NULL), PMR_ERR_ARGUMENT, "established", NULL);
    }
    if (!CHECK_OK(pmr_send_window_create(c, send_buffer, bytes, &s)) ||
        !CHECK_OK(pmr_recv_window_create(c, recv_buffer, bytes, &r)) ||
        !CHECK_OK(pmr_send_window_create(c, NULL, 300, &owned_s)) ||
        !CHECK_OK(pmr_recv_window_create(c, NULL, 300, &owned_r))) {
        return;
    }
    CHECK(pmr_send_window_data(s) == (void*)send_buffer);
    CHECK(pmr_recv_window_data(r) == (void*)recv_buffer);
    CHECK(pmr_send_window_data(owned_s) != NULL);
    CHECK_OK(pmr_send_window_size(s, &size));
    CHECK(size == bytes);
    CHECK_OK(pmr_recv_window_size(owned_r, &size));
    CHECK(size == 300);
    CHECK(all_equal((const unsigned char*)pmr_recv_window_data(owned_r), 300, 0));

    /* Misuse before the first round. */
    CHECK_ERROR(pmr_recv_window_received_bytes(r, &received), PMR_ERR_USAGE, "received_bytes",
                NULL);
    CHECK_ERROR(pmr_send_window_post(s, bytes), PMR_ERR_USAGE, "init", NULL);
    CHECK_ERROR(pmr_send_window_wait(s), PMR_ERR_USAGE, "post", NULL);
    CHECK_ERROR(pmr_recv_window_wait(r), PMR_ERR_USAGE, NULL, NULL);

    for (round = 0; round < 3; ++round) {
        fill(send_buffer, bytes, round);
        if (!round_trip(s, r, bytes)) {
            return;
        }
        CHECK(matches(recv_buffer, bytes, round));
        CHECK_OK(pmr_recv_window_received_bytes(r, &received));
        CHECK(received == bytes);
    }
    CHECK(all_equal(memory, 64, guard) && all_equal(memory + 64 + bytes, 64, guard));

    /* A partial post delivers only its prefix. */
    memset(recv_buffer, 0, bytes);
    fill(send_buffer, bytes, 9);
    if (round_trip(s, r, 10)) {
        CHECK_OK(pmr_recv_window_received_bytes(r, &received));
        CHECK(received == 10);
        CHECK(matches(recv_buffer, 10, 9));
        CHECK(all_equal(recv_buffer + 10, bytes - 10, 0));
    }

    /* A wait with its own timeout instead of PMR_TIMEOUT: PMR_ERR_TIMEOUT while nothing was sent,
       naming the window and its peer; the transfer stays in flight and completes later. */
    CHECK_OK(pmr_recv_window_init(r));
    CHECK_OK(pmr_recv_window_post(r));
    CHECK_ERROR(pmr_recv_window_wait_timeout(r, 0.05), PMR_ERR_TIMEOUT,
                "the timeout given to wait()", "receive window #0");
    CHECK_ERROR(pmr_recv_window_wait_timeout(r, 0.0), PMR_ERR_ARGUMENT, "timeout", NULL);
    CHECK_OK(pmr_send_window_init(s));
    CHECK_OK(pmr_send_window_post(s, bytes));
    CHECK_OK(pmr_send_window_wait_timeout(s, 60.0));
    CHECK_OK(pmr_recv_window_wait_timeout(r, 60.0));

    /* All windows at once. A window not posted: PMR_ERR_USAGE before anything waits. Then a
       round through pmr_wait_all_timeout (its own deadline: PMR_ERR_TIMEOUT while nothing was
       sent, the windows still posted), pmr_wait_all and pmr_test_all, each delivering its data. */
    CHECK_ERROR(pmr_wait_all(&s, 1, &r, 1), PMR_ERR_USAGE, "no transfer in flight",
                "send window #0");
    CHECK_ERROR(pmr_wait_all(NULL, 1, &r, 1), PMR_ERR_ARGUMENT, "array of send windows is NULL",
                "pmr_wait_all");
    CHECK_ERROR(pmr_test_all(&s, 1, &r, 1, NULL), PMR_ERR_ARGUMENT, "`done` is NULL", NULL);
    CHECK_OK(pmr_wait_all(NULL, 0, NULL, 0));
    CHECK_OK(pmr_recv_window_init(r));
    CHECK_OK(pmr_recv_window_post(r));
    CHECK_ERROR(pmr_wait_all_timeout(NULL, 0, &r, 1, 0.05), PMR_ERR_TIMEOUT, "receive window #0",
                NULL);
    CHECK_ERROR(pmr_wait_all_timeout(NULL, 0, &r, 1, 0.0), PMR_ERR_ARGUMENT, "timeout", NULL);
    memset(recv_buffer, 0, bytes);
    fill(send_buffer, bytes, 11);
    CHECK_OK(pmr_send_window_init(s));
    CHECK_OK(pmr_send_window_post(s, bytes));
    CHECK_OK(pmr_wait_all_timeout(&s, 1, &r, 1, 60.0));
    CHECK(matches(recv_buffer, bytes, 11));
    {
        int k;
        for (k = 0; k < 2; ++k) {
            memset(recv_buffer, 0, bytes);
            fill(send_buffer, bytes, 12 + (unsigned)k);
            CHECK_OK(pmr_recv_window_init(r));
            CHECK_OK(pmr_send_window_init(s));
            CHECK_OK(pmr_send_window_post(s, bytes));
            CHECK_OK(pmr_recv_window_post(r));
            if (k == 0) {
                CHECK_OK(pmr_wait_all(&s, 1, &r, 1));
            } else {
                int done = 0;
                int rc = PMR_SUCCESS;
                while (!done && rc == PMR_SUCCESS) {
                    rc = pmr_test_all(&s, 1, &r, 1, &done);
                }
                CHECK_OK(rc);
            }
            CHECK(matches(recv_buffer, bytes, 12 + (unsigned)k));
            /* Both idle again. */
            CHECK_RC(pmr_send_window_wait(s), PMR_ERR_USAGE);
        }
    }

    /* Posting more than the window: a size error, and the window stays usable. */
    CHECK_OK(pmr_recv_window_init(r));
    CHECK_OK(pmr_send_window_init(s));
    CHECK_ERROR(pmr_send_window_post(s, bytes + 1), PMR_ERR_SIZE, "1001", NULL);
    CHECK_OK(pmr_send_window_post(s, bytes));
    CHECK_ERROR(pmr_recv_window_init(r), PMR_ERR_USAGE, NULL, NULL);
    CHECK_OK(pmr_recv_window_post(r));
    {
        /* test() until both complete. */
        int send_done = 0;
        int recv_done = 0;
        long spins = 0;
        while ((!send_done || !recv_done) && spins < 100000000L) {
            if (!send_done) {
                CHECK_OK(pmr_send_window_test(s, &send_done));
            }
            if (!recv_done) {
                CHECK_OK(pmr_recv_window_test(r, &recv_done));
            }
            ++spins;
        }
        CHECK(send_done && recv_done);
    }

    /* The second pair of windows: library-owned memory, reached through data(). */
    fill((unsigned char*)pmr_send_window_data(owned_s), 300, 4);
    if (round_trip(owned_s, owned_r, 300)) {
        CHECK(matches((const unsigned char*)pmr_recv_window_data(owned_r), 300, 4));
    }

    CHECK_OK(pmr_connection_provider(c, provider, sizeof provider));
    CHECK(strcmp(provider, "self") == 0);
    {
        int flag = 0;
        CHECK_OK(pmr_connection_established(c, &flag));
        CHECK(flag == 1);
    }

    /* Windows keep their connection alive: the handle may go first. */
    CHECK_OK(pmr_connection_destroy(&c));
    CHECK(c == NULL);
    fill(send_buffer, bytes, 5);
    if (round_trip(s, r, bytes)) {
        CHECK(matches(recv_buffer, bytes, 5));
    }
    CHECK_OK(pmr_send_window_destroy(&s));
    CHECK_OK(pmr_recv_window_destroy(&r));
    CHECK_OK(pmr_send_window_destroy(&owned_s));
    CHECK_OK(pmr_recv_window_destroy(&owned_r));
    CHECK(s == NULL && r == NULL && owned_s == NULL && owned_r == NULL);
    CHECK_ERROR(pmr_send_window_init(s), PMR_ERR_ARGUMENT, "NULL", NULL);
}

/* MPI_PROC_NULL: every operation succeeds and nothing is delivered. */
static void test_null_connection(void) {
    pmr_connection c = NULL;
    pmr_send_window s = NULL;
    pmr_recv_window r = NULL;
    unsigned char out[16];
    unsigned char in[16];
    char provider[32];
    memset(out, 1, sizeof out);
    memset(in, 7, sizeof in);
    if (!CHECK_OK(pmr_connection_create(MPI_COMM_WORLD, MPI_PROC_NULL, 3, 4, &c)) ||
        !CHECK_OK(pmr_send_window_create(c, out, sizeof out, &s)) ||
        !CHECK_OK(pmr_recv_window_create(c, in, sizeof in, &r))) {
        return;
    }
    round_trip(s, r, sizeof out);
    CHECK(all_equal(in, sizeof in, 7));
    CHECK_OK(pmr_connection_provider(c, provider, sizeof provider));
    CHECK(strcmp(provider, "null") == 0);
    CHECK_OK(pmr_send_window_destroy(&s));
    CHECK_OK(pmr_recv_window_destroy(&r));
    CHECK_OK(pmr_connection_destroy(&c));
}

/* The message is per thread: a failure in another thread leaves this thread's message alone. */
static void* fail_in_thread(void* result) {
    char* message = (char*)result;
    const int rc = pmr_recv_window_post(NULL);
    snprintf(message, 256, "%d %s", rc, pmr_last_error());
    return NULL;
}

static void test_thread_local_message(void) {
    pthread_t thread;
    char other[256] = "";
    char expected[256];
    CHECK_RC(pmr_send_window_wait(NULL), PMR_ERR_ARGUMENT);
    snprintf(expected, sizeof expected, "%s", pmr_last_error());
    if (!CHECK(pthread_create(&thread, NULL, fail_in_thread, other) == 0)) {
        return;
    }
    pthread_join(thread, NULL);
    CHECK(strstr(other, "pmr_recv_window_post") != NULL);
    CHECK(strncmp(other, "2 ", 2) == 0);
    CHECK(strcmp(pmr_last_error(), expected) == 0);
    CHECK(strstr(pmr_last_error(), "pmr_send_window_wait") != NULL);
}

/* Grids over MPI_COMM_SELF (extent 1): periodic, a rank is its own neighbour on both sides. */
static void test_communicator(void) {
    const int dims[2] = {0, 1};
    const int periods[2] = {1, 0};
    int extents[2] = {-1, -1};
    int periodic[2] = {-1, -1};
    int coords[2] = {-1, -1};
    int value = -1;
    int topology = MPI_UNDEFINED;
    MPI_Comm comm = MPI_COMM_NULL;
    pmr_communicator grid = NULL;
    pmr_communicator plain = NULL;
    pmr_connection up = NULL;
    pmr_connection down = NULL;
    pmr_connection border = NULL;
    pmr_send_window up_send = NULL;
    pmr_recv_window up_recv = NULL;
    pmr_send_window down_send = NULL;
    pmr_recv_window down_recv = NULL;
    double to_up[4] = {1, 2, 3, 4};
    double to_down[4] = {5, 6, 7, 8};
    double from_up[4] = {0, 0, 0, 0};
    double from_down[4] = {0, 0, 0, 0};
    char provider[32];

    CHECK_ERROR(pmr_communicator_create(MPI_COMM_SELF, -1, dims, periods, 0, &grid),
                PMR_ERR_ARGUMENT, "ndims is -1", NULL);
    CHECK_ERROR(pmr_communicator_create(MPI_COMM_SELF, 2, NULL, periods, 0, &grid),
                PMR_ERR_ARGUMENT, "dims is NULL", NULL);
    {
        const int too_many[1] = {2};
        CHECK_ERROR(pmr_communicator_create(MPI_COMM_SELF, 1, too_many, NULL, 0, &grid),
                    PMR_ERR_ARGUMENT, "does not match the 1 ranks", NULL);
    }
    CHECK(grid == NULL);
    if (!CHECK_OK(pmr_communicator_create(MPI_COMM_SELF, 2, dims, periods, 0, &grid))) {
        return;
    }
    CHECK_OK(pmr_communicator_rank(grid, &value));
    CHECK(value == 0);
    CHECK_OK(pmr_communicator_size(grid, &value));
    CHECK(value == 1);
    CHECK_OK(pmr_communicator_dimensions(grid, &value));
    CHECK(value == 2);
    CHECK_OK(pmr_communicator_grid(grid, 2, extents, periodic, coords));
    CHECK(extents[0] == 1 && extents[1] == 1);
    CHECK(periodic[0] == 1 && periodic[1] == 0);
    CHECK(coords[0] == 0 && coords[1] == 0);
    CHECK_OK(pmr_communicator_comm(grid, &comm));
    MPI_Topo_test(comm, &topology);
    CHECK(topology == MPI_CART);

    CHECK_OK(pmr_communicator_neighbor(grid, 0, +1, &value));
    CHECK(value == 0);
    CHECK_OK(pmr_communicator_neighbor(grid, 1, -1, &value));
    CHECK(value == MPI_PROC_NULL);
    CHECK_ERROR(pmr_communicator_neighbor(grid, 2, +1, &value), PMR_ERR_ARGUMENT,
                "dimension 2 is not in [0, 2)", NULL);
    CHECK_ERROR(pmr_communicator_neighbor(grid, 0, 0, &value), PMR_ERR_ARGUMENT,
                "direction 0 is neither -1 nor +1", NULL);
    CHECK_ERROR(pmr_connection_create_neighbor(grid, 0, 2, 0, &up), PMR_ERR_ARGUMENT, "direction 2",
                NULL);
    CHECK_ERROR(pmr_connection_create_neighbor(grid, 0, 1, -100, &up), PMR_ERR_ARGUMENT,
                "out of range", NULL);
    CHECK(up == NULL);

    /* Up and down are both this rank: what goes up arrives in the window of direction -1. */
    if (CHECK_OK(pmr_connection_create_neighbor(grid, 0, +1, 10, &up)) &&
        CHECK_OK(pmr_connection_create_neighbor(grid, 0, -1, 10, &down)) &&
        CHECK_OK(pmr_send_window_create(up, to_up, sizeof to_up, &up_send)) &&
        CHECK_OK(pmr_recv_window_create(up, from_up, sizeof from_up, &up_recv)) &&
        CHECK_OK(pmr_send_window_create(down, to_down, sizeof to_down, &down_send)) &&
        CHECK_OK(pmr_recv_window_create(down, from_down, sizeof from_down, &down_recv))) {
        CHECK_OK(pmr_recv_window_init(up_recv));
        CHECK_OK(pmr_recv_window_init(down_recv));
        CHECK_OK(pmr_send_window_init(up_send));
        CHECK_OK(pmr_send_window_init(down_send));
        CHECK_OK(pmr_send_window_post(up_send, sizeof to_up));
        CHECK_OK(pmr_send_window_post(down_send, sizeof to_down));
        CHECK_OK(pmr_recv_window_post(up_recv));
        CHECK_OK(pmr_recv_window_post(down_recv));
        CHECK_OK(pmr_send_window_wait(up_send));
        CHECK_OK(pmr_send_window_wait(down_send));
        CHECK_OK(pmr_recv_window_wait(up_recv));
        CHECK_OK(pmr_recv_window_wait(down_recv));
        CHECK(from_down[0] == 1 && from_down[3] == 4); /* sent up, arrived from below */
        CHECK(from_up[0] == 5 && from_up[3] == 8);
    }
    CHECK_OK(pmr_send_window_destroy(&up_send));
    CHECK_OK(pmr_recv_window_destroy(&up_recv));
    CHECK_OK(pmr_send_window_destroy(&down_send));
    CHECK_OK(pmr_recv_window_destroy(&down_recv));
    CHECK_OK(pmr_connection_destroy(&up));
    CHECK_OK(pmr_connection_destroy(&down));

    /* The non-periodic dimension: a null connection. */
    if (CHECK_OK(pmr_connection_create_neighbor(grid, 1, +1, 0, &border))) {
        CHECK_OK(pmr_connection_provider(border, provider, sizeof provider));
        CHECK(strcmp(provider, "null") == 0);
        CHECK_OK(pmr_connection_destroy(&border));
    }
    CHECK_OK(pmr_communicator_destroy(&grid));
    CHECK(grid == NULL);

    /* Wrapping a communicator without a grid: no neighbours. */
    if (CHECK_OK(pmr_communicator_create(MPI_COMM_WORLD, 0, NULL, NULL, 0, &plain))) {
        CHECK_OK(pmr_communicator_dimensions(plain, &value));
        CHECK(value == 0);
        CHECK_ERROR(pmr_communicator_grid(plain, 2, extents, NULL, NULL), PMR_ERR_USAGE,
                    "no Cartesian grid", NULL);
        CHECK_ERROR(pmr_communicator_neighbor(plain, 0, 1, &value), PMR_ERR_USAGE,
                    "no Cartesian grid", NULL);
        CHECK_OK(pmr_communicator_comm(plain, &comm));
        CHECK(comm == MPI_COMM_WORLD);
        CHECK_OK(pmr_communicator_destroy(&plain));
    }
}

int main(int argc, char** argv) {
    /* Before MPI_Init: no message yet, and pmr refuses with a set-up error. */
    const int no_message = strcmp(pmr_last_error(), "") == 0;
    pmr_connection early = NULL;
    pmr_communicator early_grid = NULL;
    const int early_rc = pmr_connection_create(MPI_COMM_WORLD, 0, 0, 0, &early);
    char early_message[512];
    const int early_grid_rc =
        pmr_communicator_create(MPI_COMM_WORLD, 0, NULL, NULL, 0, &early_grid);
    int code;
    snprintf(early_message, sizeof early_message, "%s", pmr_last_error());

    MPI_Init(&argc, &argv);
    CHECK(no_message);
    CHECK(early_rc == PMR_ERR_BOOTSTRAP && early == NULL);
    CHECK(early_grid_rc == PMR_ERR_BOOTSTRAP && early_grid == NULL);
    CHECK(strstr(early_message, "MPI is not initialised") != NULL);
    CHECK(strstr(early_message, "MPI_Init") != NULL);

    test_error_names();
    test_null_handles();
    test_bad_arguments();
    test_self_exchange();
    test_null_connection();
    test_thread_local_message();
    test_communicator();

    code = check_finish("test_capi_unit");
    MPI_Finalize();
    return code;
}
