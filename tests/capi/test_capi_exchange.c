/* SPDX-License-Identifier: MIT */
/* A 3D halo exchange through the C interface on every rank count: a Cartesian grid from
 * pmr_communicator_create, one connection per face from pmr_connection_create_neighbor, user
 * buffers in dimension 0 and library-owned windows in the others, a second window pair per
 * connection with partial posts, wait() and test(), and all windows at once with pmr_wait_all()
 * and pmr_test_all(). Every ghost cell of every round is compared
 * with the value the neighbour's global coordinates give. Compiled as C99. */
#include "check.h"

#include <pmr/pmr.h>

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { dims = 3, faces = 2 * dims, rounds = 8, header_bytes = 16, header_used = 2 * sizeof(int) };

/* Cells per rank, different per dimension so that a face sent the wrong way does not fit. */
static const int box[dims] = {4, 3, 5};

typedef struct {
    pmr_communicator grid;
    int extent[dims];
    int periodic[dims];
    int coord[dims];
    int rank;
    double* field; /* (box + 2)^3 with one ghost layer */
    pmr_connection connection[faces];
    pmr_send_window send[faces];
    pmr_recv_window recv[faces];
    pmr_send_window header_send[faces];
    pmr_recv_window header_recv[faces];
    double* send_buffer[faces]; /* user buffers (dimension 0 only) */
    double* recv_buffer[faces];
    int neighbor[faces];
} Halo;

static int dimension_of(int face) {
    return face / 2;
}
static int direction_of(int face) {
    return face % 2 == 0 ? -1 : +1;
}

static size_t face_cells(int d) {
    size_t cells = 1;
    int e;
    for (e = 0; e < dims; ++e) {
        if (e != d) {
            cells *= (size_t)box[e];
        }
    }
    return cells;
}

static size_t cell_index(const int c[dims]) {
    return ((size_t)c[0] * (size_t)(box[1] + 2) + (size_t)c[1]) * (size_t)(box[2] + 2) +
           (size_t)c[2];
}

/* The value of a cell: exact in a double, different for every global cell and round. */
static double value_at(const long g[dims], int round) {
    return (double)g[0] + 1000.0 * (double)g[1] + 1000000.0 * (double)g[2] + 0.25 * round;
}

/* Walks the layer `layer` of dimension d (the other two dimensions over their interior), calling
 * visit(cell, position) in the order both neighbours agree on. */
typedef void (*Visit)(Halo* h, size_t cell, size_t position, double* buffer, int round,
                      const int local[dims]);

static void for_each_face_cell(Halo* h, int d, int layer, double* buffer, int round, Visit visit) {
    const int a = d == 0 ? 1 : 0;
    const int b = d == 2 ? 1 : 2;
    int c[dims];
    size_t position = 0;
    c[d] = layer;
    for (c[a] = 1; c[a] <= box[a]; ++c[a]) {
        for (c[b] = 1; c[b] <= box[b]; ++c[b]) {
            visit(h, cell_index(c), position++, buffer, round, c);
        }
    }
}

static void pack_cell(Halo* h, size_t cell, size_t position, double* buffer, int round,
                      const int local[dims]) {
    (void)round;
    (void)local;
    buffer[position] = h->field[cell];
}

static void unpack_cell(Halo* h, size_t cell, size_t position, double* buffer, int round,
                        const int local[dims]) {
    (void)round;
    (void)local;
    h->field[cell] = buffer[position];
}

static int ghost_errors = 0;

/* A ghost cell holds the value of the neighbour's cell at the same global coordinates, wrapped
 * around a periodic dimension. */
static void check_ghost(Halo* h, size_t cell, size_t position, double* buffer, int round,
                        const int local[dims]) {
    long g[dims];
    int d;
    (void)position;
    (void)buffer;
    for (d = 0; d < dims; ++d) {
        const long global_extent = (long)h->extent[d] * box[d];
        g[d] = (long)h->coord[d] * box[d] + local[d] - 1;
        g[d] = (g[d] + global_extent) % global_extent;
    }
    if (h->field[cell] != value_at(g, round)) {
        if (ghost_errors++ < 5) {
            fprintf(stderr, "rank %d round %d: ghost (%d,%d,%d) is %g, expected %g\n", h->rank,
                    round, local[0], local[1], local[2], h->field[cell], value_at(g, round));
        }
    }
}

/* A ghost cell next to a non-periodic border keeps its initial value. */
static void check_untouched(Halo* h, size_t cell, size_t position, double* buffer, int round,
                            const int local[dims]) {
    (void)position;
    (void)buffer;
    (void)round;
    if (h->field[cell] != -1.0 && ghost_errors++ < 5) {
        fprintf(stderr, "rank %d: ghost (%d,%d,%d) at a closed border was written: %g\n", h->rank,
                local[0], local[1], local[2], h->field[cell]);
    }
}

static void fill_field(Halo* h, int round) {
    const size_t cells = (size_t)(box[0] + 2) * (size_t)(box[1] + 2) * (size_t)(box[2] + 2);
    int c[dims];
    size_t i;
    for (i = 0; i < cells; ++i) {
        h->field[i] = -1.0;
    }
    for (c[0] = 1; c[0] <= box[0]; ++c[0]) {
        for (c[1] = 1; c[1] <= box[1]; ++c[1]) {
            for (c[2] = 1; c[2] <= box[2]; ++c[2]) {
                long g[dims];
                int d;
                for (d = 0; d < dims; ++d) {
                    g[d] = (long)h->coord[d] * box[d] + c[d] - 1;
                }
                h->field[cell_index(c)] = value_at(g, round);
            }
        }
    }
}

static double* send_memory(Halo* h, int face) {
    return dimension_of(face) == 0 ? h->send_buffer[face]
                                   : (double*)pmr_send_window_data(h->send[face]);
}
static double* recv_memory(Halo* h, int face) {
    return dimension_of(face) == 0 ? h->recv_buffer[face]
                                   : (double*)pmr_recv_window_data(h->recv[face]);
}

static int set_up(Halo* h, const int periods[dims]) {
    const int zeros[dims] = {0, 0, 0};
    const size_t cells = (size_t)(box[0] + 2) * (size_t)(box[1] + 2) * (size_t)(box[2] + 2);
    int face;
    memset(h, 0, sizeof *h);
    if (!CHECK_OK(pmr_communicator_create(MPI_COMM_WORLD, dims, zeros, periods, 0, &h->grid)) ||
        !CHECK_OK(pmr_communicator_grid(h->grid, dims, h->extent, h->periodic, h->coord)) ||
        !CHECK_OK(pmr_communicator_rank(h->grid, &h->rank))) {
        return 0;
    }
    h->field = (double*)malloc(cells * sizeof(double));
    for (face = 0; face < faces; ++face) {
        const int d = dimension_of(face);
        const size_t bytes = face_cells(d) * sizeof(double);
        if (!CHECK_OK(
                pmr_communicator_neighbor(h->grid, d, direction_of(face), &h->neighbor[face])) ||
            !CHECK_OK(pmr_connection_create_neighbor(h->grid, d, direction_of(face), 0,
                                                     &h->connection[face]))) {
            return 0;
        }
        if (d == 0) {
            h->send_buffer[face] = (double*)malloc(bytes);
            h->recv_buffer[face] = (double*)malloc(bytes);
        }
        /* Window #0: the face; window #1: a header of which only a prefix is posted. */
        if (!CHECK_OK(pmr_send_window_create(h->connection[face], h->send_buffer[face], bytes,
                                             &h->send[face])) ||
            !CHECK_OK(pmr_recv_window_create(h->connection[face], h->recv_buffer[face], bytes,
                                             &h->recv[face])) ||
            !CHECK_OK(pmr_send_window_create(h->connection[face], NULL, header_bytes,
                                             &h->header_send[face])) ||
            !CHECK_OK(pmr_recv_window_create(h->connection[face], NULL, header_bytes,
                                             &h->header_recv[face]))) {
            return 0;
        }
    }
    return 1;
}

static void tear_down(Halo* h) {
    int face;
    for (face = 0; face < faces; ++face) {
        CHECK_OK(pmr_send_window_destroy(&h->send[face]));
        CHECK_OK(pmr_recv_window_destroy(&h->recv[face]));
        CHECK_OK(pmr_send_window_destroy(&h->header_send[face]));
        CHECK_OK(pmr_recv_window_destroy(&h->header_recv[face]));
        CHECK_OK(pmr_connection_destroy(&h->connection[face]));
        free(h->send_buffer[face]);
        free(h->recv_buffer[face]);
    }
    free(h->field);
    CHECK_OK(pmr_communicator_destroy(&h->grid));
}

/* Waits for a receive with test() (polling) or wait(). */
static int finish_recv(pmr_recv_window w, int poll) {
    int done = 0;
    if (!poll) {
        return CHECK_OK(pmr_recv_window_wait(w));
    }
    int rc = PMR_SUCCESS;
    while (!done && rc == PMR_SUCCESS) {
        rc = pmr_recv_window_test(w, &done);
    }
    return CHECK_OK(rc);
}

static void exchange_round(Halo* h, int round) {
    int face;
    fill_field(h, round);
    for (face = 0; face < faces; ++face) {
        CHECK_OK(pmr_recv_window_init(h->recv[face]));
        CHECK_OK(pmr_recv_window_init(h->header_recv[face]));
    }
    for (face = 0; face < faces; ++face) {
        const int d = dimension_of(face);
        const int layer = direction_of(face) < 0 ? 1 : box[d];
        int* header = (int*)pmr_send_window_data(h->header_send[face]);
        for_each_face_cell(h, d, layer, send_memory(h, face), round, pack_cell);
        header[0] = h->rank;
        header[1] = round;
        CHECK_OK(pmr_send_window_init(h->send[face]));
        CHECK_OK(pmr_send_window_post(h->send[face], face_cells(d) * sizeof(double)));
        CHECK_OK(pmr_send_window_init(h->header_send[face]));
        CHECK_OK(pmr_send_window_post(h->header_send[face], header_used));
    }
    for (face = 0; face < faces; ++face) {
        CHECK_OK(pmr_recv_window_post(h->recv[face]));
        CHECK_OK(pmr_recv_window_post(h->header_recv[face]));
    }
    if (round % 4 >= 2) {
        /* Rounds 2 and 3 (mod 4) complete every window at once: pmr_wait_all, pmr_test_all. */
        pmr_send_window sends[2 * faces];
        pmr_recv_window recvs[2 * faces];
        for (face = 0; face < faces; ++face) {
            sends[2 * face] = h->send[face];
            sends[2 * face + 1] = h->header_send[face];
            recvs[2 * face] = h->recv[face];
            recvs[2 * face + 1] = h->header_recv[face];
        }
        if (round % 4 == 2) {
            CHECK_OK(pmr_wait_all(sends, 2 * faces, recvs, 2 * faces));
        } else {
            int done = 0;
            int rc = PMR_SUCCESS;
            while (!done && rc == PMR_SUCCESS) {
                rc = pmr_test_all(sends, 2 * faces, recvs, 2 * faces, &done);
            }
            CHECK_OK(rc);
        }
        /* Each window is idle again: a second wait is a usage error. */
        CHECK_RC(pmr_recv_window_wait(h->recv[0]), PMR_ERR_USAGE);
        CHECK_RC(pmr_send_window_wait(h->header_send[faces - 1]), PMR_ERR_USAGE);
    } else {
        for (face = 0; face < faces; ++face) {
            CHECK_OK(pmr_send_window_wait(h->send[face]));
            CHECK_OK(pmr_send_window_wait(h->header_send[face]));
        }
    }
    for (face = 0; face < faces; ++face) {
        const int d = dimension_of(face);
        const int ghost = direction_of(face) < 0 ? 0 : box[d] + 1;
        size_t received = 0;
        if (round % 4 < 2 && (!finish_recv(h->recv[face], round % 2 == 1) ||
                              !finish_recv(h->header_recv[face], face % 2 == 0))) {
            continue;
        }
        if (h->neighbor[face] == MPI_PROC_NULL) {
            continue; /* a null connection delivers nothing: the ghosts keep -1 */
        }
        CHECK_OK(pmr_recv_window_received_bytes(h->recv[face], &received));
        CHECK(received == face_cells(d) * sizeof(double));
        CHECK_OK(pmr_recv_window_received_bytes(h->header_recv[face], &received));
        CHECK(received == header_used);
        {
            const int* header = (const int*)pmr_recv_window_data(h->header_recv[face]);
            CHECK(header[0] == h->neighbor[face]);
            CHECK(header[1] == round);
        }
        for_each_face_cell(h, d, ghost, recv_memory(h, face), round, unpack_cell);
    }
    for (face = 0; face < faces; ++face) {
        const int d = dimension_of(face);
        const int ghost = direction_of(face) < 0 ? 0 : box[d] + 1;
        for_each_face_cell(h, d, ghost, NULL, round,
                           h->neighbor[face] == MPI_PROC_NULL ? check_untouched : check_ghost);
    }
}

static void run(const int periods[dims]) {
    Halo h;
    int round;
    ghost_errors = 0;
    if (set_up(&h, periods)) {
        for (round = 0; round < rounds; ++round) {
            exchange_round(&h, round);
        }
        CHECK(ghost_errors == 0);
        if (h.rank == 0) {
            printf("grid %d x %d x %d, periodic %d %d %d: %d rounds checked\n", h.extent[0],
                   h.extent[1], h.extent[2], periods[0], periods[1], periods[2], rounds);
        }
    }
    tear_down(&h);
}

int main(int argc, char** argv) {
    const int periodic[dims] = {1, 1, 1};
    const int mixed[dims] = {0, 1, 0};
    int code;
    MPI_Init(&argc, &argv);
    run(periodic);
    run(mixed);
    code = check_finish("test_capi_exchange");
    MPI_Finalize();
    return code;
}
