/* SPDX-License-Identifier: MIT */
/* The neighbour exchange through the C interface, compiled as C99: a periodic ring (a 1D
 * Cartesian communicator) with library-owned buffers and different counts per direction, every
 * algorithm; an explicit neighbour list over user buffers with test() polling; the same bytes
 * arrive whatever the algorithm. Errors: no grid, a bad algorithm, NULL handles and arrays, a bad
 * index, calls out of order, and counts that disagree between neighbours (PMR_ERR_SIZE on both
 * ends). */
#include "check.h"

#include <pmr/pmr.h>

#include <mpi.h>
#include <stdint.h>
#include <stdlib.h>

enum { rounds = 3, up_count = 3000, down_count = 1001 };

/* Element `e` that `sender` puts into its message `index` in `round`. */
static uint64_t value(int sender, size_t index, size_t e, int round) {
    uint64_t x = ((uint64_t)sender << 48) ^ ((uint64_t)index << 40) ^ ((uint64_t)round << 32) ^ e;
    x ^= x >> 31;
    x *= 0x9e3779b97f4a7c15ULL;
    return x ^ (x >> 29);
}

/* A ring exchange of `algorithm` over library-owned buffers; returns the number of wrong
 * elements received over all rounds. */
static size_t ring(pmr_communicator cart, int algorithm, int tag_offset) {
    const size_t counts[2] = {down_count, up_count}; /* to -1, to +1 */
    pmr_neighbor_exchange x = NULL;
    pmr_neighbor_options options;
    size_t wrong = 0;
    size_t size = 0;
    size_t i;
    size_t e;
    int me = 0;
    int round;
    pmr_neighbor_options_init(&options);
    options.algorithm = algorithm;
    options.min_fragment_bytes = 1;
    options.tag_offset = tag_offset;
    pmr_communicator_rank(cart, &me);
    if (!CHECK_OK(pmr_neighbor_exchange_create_cart(cart, counts, sizeof(uint64_t), NULL, NULL,
                                                    &options, &x))) {
        return 1;
    }
    CHECK_OK(pmr_neighbor_exchange_size(x, &size));
    CHECK(size == 2);
    for (round = 1; round <= rounds; ++round) {
        for (i = 0; i < size; ++i) {
            uint64_t* out = (uint64_t*)pmr_neighbor_exchange_send_data(x, i);
            CHECK(out != NULL);
            for (e = 0; out != NULL && e < counts[i]; ++e) {
                out[e] = value(me, i, e, round);
            }
        }
        CHECK_OK(pmr_neighbor_exchange_run(x));
        for (i = 0; i < size; ++i) {
            const uint64_t* in = (const uint64_t*)pmr_neighbor_exchange_recv_data(x, i);
            int from = -1;
            CHECK_OK(pmr_neighbor_exchange_neighbor_rank(x, i, &from));
            /* From the neighbour in direction i: its message in the opposite direction. */
            for (e = 0; in != NULL && e < counts[i ^ 1U]; ++e) {
                wrong += in[e] != value(from, i ^ 1U, e, round) ? 1 : 0;
            }
        }
    }
    if (algorithm == PMR_NEIGHBOR_DIRECT) {
        int used = -1;
        size_t fragments = 0;
        CHECK_OK(pmr_neighbor_exchange_message(x, 0, &used, &fragments));
        CHECK(used == PMR_NEIGHBOR_DIRECT);
        CHECK(fragments == 1);
    }
    {
        /* One rail on shared memory and to the own rank; PMR_RAILS where a variant forces UCX
         * rails between the ranks. */
        const char* forced = getenv("PMR_RAILS");
        int ranks = 1;
        size_t rails = 0;
        MPI_Comm_size(MPI_COMM_WORLD, &ranks);
        CHECK_OK(pmr_neighbor_exchange_rails(x, &rails));
        CHECK(rails == (forced != NULL && ranks > 1 ? (size_t)strtoul(forced, NULL, 10) : 1U));
        CHECK_ERROR(pmr_neighbor_exchange_rails(NULL, &rails), PMR_ERR_ARGUMENT, "NULL", NULL);
    }
    CHECK_OK(pmr_neighbor_exchange_destroy(&x));
    CHECK(x == NULL);
    return wrong;
}

int main(int argc, char** argv) {
    pmr_communicator world = NULL;
    pmr_communicator cart = NULL;
    pmr_neighbor_exchange x = NULL;
    pmr_neighbor_options options;
    int rank = 0;
    int size = 1;
    int periodic = 1;
    int algorithm;
    int done = 0;
    int round;
    size_t e;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK_OK(pmr_communicator_create(MPI_COMM_WORLD, 0, NULL, NULL, 0, &world));
    CHECK_OK(pmr_communicator_create(MPI_COMM_WORLD, 1, &size, &periodic, 0, &cart));

    /* Every algorithm delivers every element. */
    for (algorithm = PMR_NEIGHBOR_AUTOMATIC; algorithm <= PMR_NEIGHBOR_SPLIT; ++algorithm) {
        CHECK(ring(cart, algorithm, 2 * algorithm) == 0);
    }

    /* An explicit list over user buffers: to the next rank, from the previous one. */
    {
        enum { n = 777 };
        uint64_t* out = (uint64_t*)malloc(n * sizeof(uint64_t));
        uint64_t* in = (uint64_t*)malloc(n * sizeof(uint64_t));
        void* sends[2];
        void* recvs[2];
        pmr_neighbor list[2];
        list[0].rank = (rank + 1) % size;
        list[0].send_count = n;
        list[0].recv_count = 0;
        list[0].send_tag = 40;
        list[0].recv_tag = 41;
        list[1].rank = (rank + size - 1) % size;
        list[1].send_count = 0;
        list[1].recv_count = n;
        list[1].send_tag = 41;
        list[1].recv_tag = 40;
        sends[0] = out;
        sends[1] = NULL;
        recvs[0] = NULL;
        recvs[1] = in;
        pmr_neighbor_options_init(&options);
        options.algorithm = PMR_NEIGHBOR_SPLIT;
        options.min_fragment_bytes = 8;
        CHECK_OK(pmr_neighbor_exchange_create(world, list, 2, sizeof(uint64_t), sends, recvs,
                                              &options, &x));
        for (round = 1; round <= rounds; ++round) {
            size_t wrong = 0;
            for (e = 0; e < n; ++e) {
                out[e] = value(rank, 7, e, round);
            }
            CHECK_OK(pmr_neighbor_exchange_start(x));
            CHECK_ERROR(pmr_neighbor_exchange_start(x), PMR_ERR_USAGE, "start()", NULL);
            done = 0;
            while (!done) {
                CHECK_OK(pmr_neighbor_exchange_test(x, &done));
            }
            for (e = 0; e < n; ++e) {
                wrong += in[e] != value((rank + size - 1) % size, 7, e, round) ? 1 : 0;
            }
            CHECK(wrong == 0);
        }
        CHECK(pmr_neighbor_exchange_send_data(x, 0) == out);
        CHECK(pmr_neighbor_exchange_recv_data(x, 1) == in);
        CHECK_OK(pmr_neighbor_exchange_destroy(&x));
        free(out);
        free(in);
    }

    /* Errors. */
    {
        const size_t counts[2] = {4, 4};
        size_t n = 0;
        pmr_neighbor_options_init(&options);
        CHECK_ERROR(pmr_neighbor_exchange_create_cart(world, counts, 8, NULL, NULL, NULL, &x),
                    PMR_ERR_USAGE, "no Cartesian grid", NULL);
        CHECK(x == NULL);
        options.algorithm = 7;
        CHECK_ERROR(pmr_neighbor_exchange_create_cart(cart, counts, 8, NULL, NULL, &options, &x),
                    PMR_ERR_ARGUMENT, "algorithm 7", NULL);
        CHECK_ERROR(pmr_neighbor_exchange_create_cart(cart, NULL, 8, NULL, NULL, NULL, &x),
                    PMR_ERR_ARGUMENT, "counts", NULL);
        CHECK_ERROR(pmr_neighbor_exchange_create(world, NULL, 2, 8, NULL, NULL, NULL, &x),
                    PMR_ERR_ARGUMENT, "neighbour array", NULL);
        CHECK_ERROR(pmr_neighbor_exchange_start(NULL), PMR_ERR_ARGUMENT, "NULL", NULL);
        CHECK_ERROR(pmr_neighbor_exchange_size(NULL, &n), PMR_ERR_ARGUMENT, "NULL", NULL);
        CHECK(pmr_neighbor_exchange_send_data(NULL, 0) == NULL);

        CHECK_OK(pmr_neighbor_exchange_create_cart(cart, counts, 8, NULL, NULL, NULL, &x));
        CHECK_ERROR(pmr_neighbor_exchange_wait(x), PMR_ERR_USAGE, "start() first", NULL);
        CHECK(pmr_neighbor_exchange_recv_data(x, 2) == NULL);
        CHECK(strstr(pmr_last_error(), "out of range") != NULL);
        CHECK_ERROR(pmr_neighbor_exchange_test(x, NULL), PMR_ERR_ARGUMENT, "done", NULL);
        CHECK_OK(pmr_neighbor_exchange_run(x));
        CHECK_OK(pmr_neighbor_exchange_destroy(&x));
        CHECK_OK(pmr_neighbor_exchange_destroy(&x)); /* NULL: nothing to do */

        if (size % 2 == 0) {
            /* Every rank expects one element more from its previous rank than that one sends. */
            pmr_neighbor list[2];
            list[0].rank = (rank + 1) % size;
            list[0].send_count = 10;
            list[0].recv_count = 10;
            list[0].send_tag = 50;
            list[0].recv_tag = 51;
            list[1].rank = (rank + size - 1) % size;
            list[1].send_count = 10;
            list[1].recv_count = 11;
            list[1].send_tag = 51;
            list[1].recv_tag = 50;
            CHECK_ERROR(pmr_neighbor_exchange_create(world, list, 2, 4, NULL, NULL, NULL, &x),
                        PMR_ERR_SIZE, "11 elements", "recv count");
            CHECK(x == NULL);
        }
    }

    CHECK_OK(pmr_communicator_destroy(&cart));
    CHECK_OK(pmr_communicator_destroy(&world));
    {
        const int code = check_finish("test_capi_neighbor");
        MPI_Finalize();
        return code;
    }
}
