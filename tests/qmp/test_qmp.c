/* SPDX-License-Identifier: MIT */
/* QMP on pmr, as a QMP code uses it: start-up with QMP's arguments, the machine and communicators,
 * logical topologies of every shape the node count allows with relative exchanges on every axis
 * in both directions (extents 1, 2 and more), explicit exchanges of strided, strided-array and
 * indexed memory, declare_multiple and its ownership, change_address, clear_to_send and
 * is_complete, the global operations (bitwise the same on every node and from run to run),
 * output, and bad arguments, which must return errors and never abort.
 *
 *   test_qmp                 initialises MPI itself, then QMP with a made-up argument list
 *   test_qmp --qmp-owns-mpi -qmp-geom ... -qmp-logic-map ...   QMP initialises MPI itself */
#include "check.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DIMS 4

static int rank_ = 0;
static int size_ = 1;

/* ---- helpers ------------------------------------------------------------------------------- */

/* A new communicator with every node (QMP declares one topology per communicator). */
static QMP_comm_t fresh_comm(void) {
    QMP_comm_t comm = NULL;
    CHECK_OK(QMP_comm_split(QMP_comm_get_job(), 0, QMP_get_node_number(), &comm));
    return comm;
}

/* The value element i of the message carries: who sent it, on which axis and way, in which
 * round; exact in a double. */
static double message_value(int sender, int axis, int dir, int round, int i) {
    return (double)sender * 1e6 + axis * 1e5 + (dir > 0 ? 5e4 : 0) + round * 1e3 + i;
}

/* ---- start-up and the machine -------------------------------------------------------------- */

static void test_machine(int owns_mpi, int argc, char** argv) {
    CHECK(QMP_is_initialized() == QMP_TRUE);
    CHECK(QMP_get_number_of_nodes() == size_);
    CHECK(QMP_get_node_number() == rank_);
    CHECK(QMP_is_primary_node() == (rank_ == 0 ? QMP_TRUE : QMP_FALSE));
    CHECK(QMP_comm_get_number_of_nodes(QMP_comm_get_job()) == size_);
    CHECK(QMP_comm_get_default() == QMP_comm_get_job());
    CHECK(QMP_get_msg_passing_type() == QMP_GRID);
    /* QMP's arguments are gone, the others kept in order. */
    for (int i = 0; i < argc; ++i) {
        CHECK(strncmp(argv[i], "-qmp-", 5) != 0);
    }
    CHECK(argv[argc] == NULL);
    if (!owns_mpi) {
        CHECK(argc == 2 && strcmp(argv[1], "-keep-me") == 0);
    }
    /* The allocated grid of -qmp-geom (one axis of all nodes, or size x 1 under --qmp-owns-mpi). */
    const int n = QMP_get_allocated_number_of_dimensions();
    const int* dims = QMP_get_allocated_dimensions();
    const int* coords = QMP_get_allocated_coordinates();
    CHECK(n >= 1 && dims != NULL && coords != NULL);
    if (n >= 1 && dims != NULL && coords != NULL) {
        CHECK(dims[0] == size_ && coords[0] == rank_);
        for (int i = 1; i < n; ++i) {
            CHECK(dims[i] == 1 && coords[i] == 0);
        }
    }
    /* A second initialisation is an error, not an abort. */
    QMP_thread_level_t provided = QMP_THREAD_SINGLE;
    CHECK_RC(QMP_init_msg_passing(NULL, NULL, QMP_THREAD_SINGLE, &provided), QMP_ERROR);
    CHECK(strstr(QMP_get_error_string(NULL), "initialised") != NULL);
    /* QMP_get_mpi_comm hands out a communicator of every node. */
    void* handle = NULL;
    CHECK_OK(QMP_get_mpi_comm(QMP_comm_get_default(), &handle));
    if (handle != NULL) {
        int size = 0;
        MPI_Comm_size(*(MPI_Comm*)handle, &size);
        CHECK(size == size_);
    }
    CHECK(QMP_version_int() == QMP_VERSION_CODE && strcmp(QMP_version_str(), "2.5.4") == 0);
    const double t0 = QMP_time();
    const double t1 = QMP_time();
    CHECK(t1 >= t0 && fabs(QMP_time() - MPI_Wtime()) < 1.0);
    CHECK(QMP_verbose(0) == 0 && QMP_verbose(0) == 0);
}

/* The job communicator's topology from the allocated grid: QMP_layout_grid uses -qmp-geom. */
static void test_layout_from_geometry(void) {
    const int lattice[4] = {4 * size_, 4, 6, 8};
    CHECK(QMP_logical_topology_is_declared() == QMP_FALSE);
    CHECK_OK(QMP_layout_grid(lattice, 4));
    CHECK(QMP_logical_topology_is_declared() == QMP_TRUE);
    CHECK(QMP_get_logical_number_of_dimensions() == 4);
    const int* dims = QMP_get_logical_dimensions();
    const int* sub = QMP_get_subgrid_dimensions();
    CHECK(dims != NULL && sub != NULL && QMP_get_number_of_subgrid_dimensions() == 4);
    if (dims != NULL && sub != NULL) {
        CHECK(dims[0] == size_ && dims[1] == 1 && dims[2] == 1 && dims[3] == 1);
        CHECK(sub[0] == 4 && sub[1] == 4 && sub[2] == 6 && sub[3] == 8);
    }
    CHECK(QMP_get_number_of_subgrid_sites() == 4 * 4 * 6 * 8);
    /* Declared once per communicator. */
    const int again[1] = {size_};
    CHECK_RC(QMP_declare_logical_topology(again, 1), QMP_TOPOLOGY_EXISTS);
}

/* QMP_layout_grid without a declared topology or allocated grid spreads the nodes over the
 * largest extents; a lattice the nodes cannot divide is an error. */
static void test_layout_automatic(void) {
    QMP_comm_t comm = fresh_comm();
    const int lattice[4] = {4, 8, 4, 16};
    CHECK_OK(QMP_comm_layout_grid(comm, lattice, 4));
    const int* dims = QMP_comm_get_logical_dimensions(comm);
    CHECK(dims != NULL);
    if (dims != NULL) {
        int product = 1;
        for (int i = 0; i < 4; ++i) {
            CHECK(lattice[i] % dims[i] == 0);
            product *= dims[i];
        }
        CHECK(product == size_);
        /* The longest axis is cut first. */
        CHECK(size_ == 1 || dims[3] >= 2);
    }
    CHECK_OK(QMP_comm_free(comm));
    if (size_ > 1) {
        comm = fresh_comm();
        const int odd[2] = {3, 5};
        CHECK_RC(QMP_comm_layout_grid(comm, odd, 2), QMP_INVALID_ARG);
        CHECK(strstr(QMP_get_error_string(NULL), "QMP_layout_grid") != NULL);
        CHECK_OK(QMP_comm_free(comm));
    }
}

/* ---- topologies and relative exchanges ----------------------------------------------------- */

/* One topology: coordinates both ways, then rounds of all 8 relative messages, through one
 * multiple handle on even rounds and through the 8 handles and QMP_wait_all on odd ones. */
static void exchange_on(const int dims[MAX_DIMS], const int* map) {
    QMP_comm_t comm = fresh_comm();
    if (map != NULL) {
        CHECK_OK(QMP_comm_declare_logical_topology_map(comm, dims, MAX_DIMS, map, MAX_DIMS));
    } else {
        CHECK_OK(QMP_comm_declare_logical_topology(comm, dims, MAX_DIMS));
    }
    const int* me = QMP_comm_get_logical_coordinates(comm);
    if (!CHECK(me != NULL)) {
        QMP_comm_free(comm);
        return;
    }
    const int node = QMP_comm_get_node_number(comm);
    CHECK(QMP_comm_get_node_number_from(comm, me) == node);
    /* The first varying axis (map[0], or 0) is the fastest. */
    const int fastest = map != NULL ? map[0] : 0;
    CHECK(me[fastest] == node % dims[fastest]);
    for (int other = 0; other < size_; ++other) {
        int* c = QMP_comm_get_logical_coordinates_from(comm, other);
        int c2[MAX_DIMS] = {-1, -1, -1, -1};
        QMP_comm_get_logical_coordinates_from2(comm, c2, other);
        CHECK(c != NULL && QMP_comm_get_node_number_from(comm, c2) == other);
        if (c != NULL) {
            CHECK(memcmp(c, c2, sizeof c2) == 0);
            free(c);
        }
    }

    enum { count = 37 };
    double send[2 * MAX_DIMS][count];
    double recv[2 * MAX_DIMS][count];
    QMP_msgmem_t mem[4 * MAX_DIMS];
    QMP_msghandle_t handles[4 * MAX_DIMS];
    int h = 0;
    for (int axis = 0; axis < MAX_DIMS; ++axis) {
        for (int side = 0; side < 2; ++side) {
            const int dir = side == 0 ? -1 : +1;
            const int f = 2 * axis + side;
            mem[2 * f] = QMP_declare_msgmem(send[f], sizeof send[f]);
            mem[2 * f + 1] = QMP_declare_msgmem(recv[f], sizeof recv[f]);
            handles[h++] = QMP_comm_declare_send_relative(comm, mem[2 * f], axis, dir, 0);
            handles[h++] = QMP_comm_declare_receive_relative(comm, mem[2 * f + 1], axis, dir, 0);
        }
    }
    for (int i = 0; i < h; ++i) {
        CHECK(handles[i] != NULL);
    }
    QMP_msghandle_t singles[4 * MAX_DIMS];
    memcpy(singles, handles, sizeof singles);
    QMP_msghandle_t all = QMP_declare_multiple(handles, h);
    CHECK(all != NULL);

    for (int round = 0; round < 6; ++round) {
        for (int axis = 0; axis < MAX_DIMS; ++axis) {
            for (int side = 0; side < 2; ++side) {
                const int f = 2 * axis + side;
                for (int i = 0; i < count; ++i) {
                    send[f][i] = message_value(node, axis, side == 0 ? -1 : 1, round, i);
                    recv[f][i] = -1.0;
                }
            }
        }
        if (round % 2 == 0) {
            CHECK_OK(QMP_start(all));
            if (round == 2) {
                /* A global sum while the halo is in flight (its own exchange on two nodes). */
                double nodes = 1.0;
                CHECK_OK(QMP_comm_sum_double(comm, &nodes));
                CHECK(nodes == (double)QMP_comm_get_number_of_nodes(comm));
            }
            CHECK_OK(QMP_wait(all));
        } else {
            for (int i = 0; i < h; ++i) {
                CHECK_OK(QMP_start(singles[i]));
            }
            CHECK_OK(QMP_wait_all(singles, h));
        }
        /* The receive from direction dir holds what the neighbour there sent towards -dir. */
        long wrong = 0;
        for (int axis = 0; axis < MAX_DIMS; ++axis) {
            for (int side = 0; side < 2; ++side) {
                const int dir = side == 0 ? -1 : +1;
                int c[MAX_DIMS];
                memcpy(c, me, sizeof c);
                c[axis] += dir;
                const int from = QMP_comm_get_node_number_from(comm, c);
                for (int i = 0; i < count; ++i) {
                    wrong += recv[2 * axis + side][i] != message_value(from, axis, -dir, round, i);
                }
            }
        }
        if (!CHECK(wrong == 0)) {
            fprintf(stderr, "  grid %dx%dx%dx%d, round %d: %ld wrong values\n", dims[0], dims[1],
                    dims[2], dims[3], round, wrong);
        }
    }
    QMP_free_msghandle(all);
    for (int i = 0; i < 4 * MAX_DIMS; ++i) {
        QMP_free_msgmem(mem[i]);
    }
    CHECK_OK(QMP_comm_free(comm));
}

static void test_topologies(void) {
    /* All nodes on each axis in turn (extent size_ there, 1 elsewhere) ... */
    for (int axis = 0; axis < MAX_DIMS; ++axis) {
        int dims[MAX_DIMS] = {1, 1, 1, 1};
        dims[axis] = size_;
        exchange_on(dims, NULL);
    }
    /* ... spread over several axes (extents 2 and more side by side) ... */
    if (size_ >= 4) {
        int dims[MAX_DIMS] = {2, size_ / 4, 1, 2};
        exchange_on(dims, NULL);
        const int map[MAX_DIMS] = {3, 1, 0, 2};
        exchange_on(dims, map);
    }
    /* ... and with the axes in another order. */
    if (size_ >= 2) {
        int dims[MAX_DIMS] = {1, 2, 1, size_ / 2};
        const int map[MAX_DIMS] = {3, 2, 1, 0};
        exchange_on(dims, map);
    }
}

/* ---- message memory ------------------------------------------------------------------------ */

/* Every node sends to the next node (of a ring, so explicit handles reach itself on one node)
 * from strided memory and receives into indexed memory, then the same through a strided array. */
static void test_memory_layouts(void) {
    const int next = (rank_ + 1) % size_;
    const int prev = (rank_ + size_ - 1) % size_;
    enum { blocks = 16 };
    double source[3 * blocks];
    double target[3 * blocks];
    for (int i = 0; i < 3 * blocks; ++i) {
        source[i] = rank_ * 1000.0 + i;
        target[i] = -1.0;
    }
    /* Two doubles out of every three. */
    QMP_msgmem_t strided =
        QMP_declare_strided_msgmem(source, 2 * sizeof(double), blocks, 3 * sizeof(double));
    /* Into blocks of 2 to 12 doubles at scattered places, not in order (32 doubles in all). */
    int blocklen[6] = {12, 2, 3, 4, 5, 6};
    int index[6] = {35, 30, 20, 10, 0, 24};
    QMP_msgmem_t indexed = QMP_declare_indexed_msgmem(target, blocklen, index, sizeof(double), 6);
    CHECK(strided != NULL && indexed != NULL);
    QMP_msghandle_t pair[2];
    pair[0] = QMP_declare_receive_from(indexed, prev, 0);
    pair[1] = QMP_declare_send_to(strided, next, 0);
    QMP_msghandle_t both = QMP_declare_send_recv_pairs(pair, 2);
    CHECK(both != NULL);
    CHECK_OK(QMP_start(both));
    CHECK_OK(QMP_wait(both));
    /* The k-th double sent is source[3 * (k / 2) + k % 2] of node prev; it lands in the k-th
     * slot of the index list. */
    int k = 0;
    long wrong = 0;
    for (int b = 0; b < 6; ++b) {
        for (int j = 0; j < blocklen[b]; ++j, ++k) {
            const double expected = prev * 1000.0 + 3 * (k / 2) + k % 2;
            wrong += target[index[b] + j] != expected;
        }
    }
    CHECK(k == 2 * blocks && wrong == 0);
    /* Slots outside the index list are untouched. */
    CHECK(target[5] == -1.0 && target[23] == -1.0 && target[47] == -1.0);
    QMP_free_msghandle(both);
    QMP_free_msgmem(strided);
    QMP_free_msgmem(indexed);

    /* A strided array: the first 4 doubles of `source`, then every fourth double from 20 on. */
    void* bases[2] = {source, source + 20};
    size_t sizes[2] = {4 * sizeof(double), sizeof(double)};
    int counts[2] = {1, 6};
    ptrdiff_t strides[2] = {0, 4 * sizeof(double)};
    QMP_msgmem_t array = QMP_declare_strided_array_msgmem(bases, sizes, counts, strides, 2);
    double flat[10];
    for (int i = 0; i < 10; ++i) {
        flat[i] = -1.0;
    }
    QMP_msgmem_t contiguous = QMP_declare_msgmem(flat, sizeof flat);
    QMP_msghandle_t r = QMP_declare_receive_from(contiguous, prev, 0);
    QMP_msghandle_t s = QMP_declare_send_to(array, next, 0);
    CHECK(r != NULL && s != NULL);
    CHECK_OK(QMP_clear_to_send(r, QMP_CTS_READY));
    CHECK_OK(QMP_start(r));
    CHECK_OK(QMP_start(s));
    while (!QMP_is_complete(r)) {
    }
    CHECK(QMP_is_complete(r) == QMP_TRUE);
    CHECK_OK(QMP_wait(r));
    CHECK_OK(QMP_wait(s));
    for (int i = 0; i < 10; ++i) {
        const double expected = prev * 1000.0 + (i < 4 ? i : 20 + 4 * (i - 4));
        CHECK(flat[i] == expected);
    }
    QMP_free_msghandle(r);
    QMP_free_msghandle(s);
    QMP_free_msgmem(array);
    QMP_free_msgmem(contiguous);

    /* QMP_allocate_memory: aligned, usable as message memory. */
    QMP_mem_t* m = QMP_allocate_aligned_memory(1000, 256, QMP_MEM_DEFAULT);
    CHECK(m != NULL && ((uintptr_t)QMP_get_memory_pointer(m)) % 256 == 0);
    QMP_free_memory(m);
    m = QMP_allocate_memory(64);
    CHECK(m != NULL && ((uintptr_t)QMP_get_memory_pointer(m)) % QMP_ALIGN_DEFAULT == 0);
    QMP_free_memory(m);
}

/* ---- change_address and declare_multiple's ownership ---------------------------------------- */

static void test_change_address(void) {
    const int next = (rank_ + 1) % size_;
    const int prev = (rank_ + size_ - 1) % size_;
    int out_a[8], out_b[8], in_a[8], in_b[8];
    for (int i = 0; i < 8; ++i) {
        out_a[i] = rank_ * 100 + i;
        out_b[i] = rank_ * 100 + 50 + i;
        in_a[i] = in_b[i] = -1;
    }
    QMP_msgmem_t ms = QMP_declare_msgmem(out_a, sizeof out_a);
    QMP_msgmem_t mr = QMP_declare_msgmem(in_a, sizeof in_a);

    /* Handles over the program's memory copy through buffers of their own and can move between
     * any two rounds. */
    QMP_msghandle_t s = QMP_declare_send_to(ms, next, 0);
    QMP_msghandle_t r = QMP_declare_receive_from(mr, prev, 0);
    CHECK_OK(QMP_start(r));
    CHECK_OK(QMP_start(s));
    /* Not while in flight. */
    CHECK_RC(QMP_change_address(s, out_b), QMP_INVALID_OP);
    CHECK(QMP_get_error_number(s) == QMP_INVALID_OP);
    CHECK_OK(QMP_wait(s));
    CHECK_OK(QMP_wait(r));
    CHECK(in_a[3] == prev * 100 + 3);
    CHECK_OK(QMP_change_address(s, out_b));
    CHECK_OK(QMP_change_address(r, in_b));
    in_a[3] = -1;
    CHECK_OK(QMP_start(r));
    CHECK_OK(QMP_start(s));
    CHECK_OK(QMP_wait(r));
    CHECK_OK(QMP_wait(s));
    CHECK(in_b[0] == prev * 100 + 50 && in_b[7] == prev * 100 + 57 && in_a[3] == -1);

    /* Handles over QMP_allocate_memory work on it directly and stay there (QMP_NOTSUPPORTED,
     * and they go on working). */
    QMP_mem_t* m_out = QMP_allocate_memory(sizeof out_a);
    QMP_mem_t* m_in = QMP_allocate_memory(sizeof in_a);
    int* d_out = QMP_get_memory_pointer(m_out);
    int* d_in = QMP_get_memory_pointer(m_in);
    QMP_msgmem_t dms = QMP_declare_msgmem(d_out, sizeof out_a);
    QMP_msgmem_t dmr = QMP_declare_msgmem(d_in, sizeof in_a);
    QMP_msghandle_t ds = QMP_declare_send_to(dms, next, 0);
    QMP_msghandle_t dr = QMP_declare_receive_from(dmr, prev, 0);
    for (int round = 0; round < 3; ++round) {
        for (int i = 0; i < 8; ++i) {
            d_out[i] = rank_ * 100 + 10 * round + i;
            d_in[i] = -1;
        }
        CHECK_OK(QMP_start(dr));
        CHECK_OK(QMP_start(ds));
        CHECK_OK(QMP_wait(ds));
        CHECK_OK(QMP_wait(dr));
        CHECK(d_in[6] == prev * 100 + 10 * round + 6);
        if (round == 0) {
            CHECK_RC(QMP_change_address(dr, in_b), QMP_NOTSUPPORTED);
            CHECK(strstr(QMP_get_error_string(dr), "cannot move") != NULL);
            CHECK_OK(QMP_change_address(dr, d_in));
        }
    }
    QMP_free_msghandle(ds);
    QMP_free_msghandle(dr);
    QMP_free_msgmem(dms);
    QMP_free_msgmem(dmr);
    QMP_free_memory(m_out);
    QMP_free_memory(m_in);

    /* Into a multiple handle: the parts are its own now, and a nested multiple is taken apart. */
    QMP_msghandle_t inner_list[1] = {r};
    QMP_msghandle_t inner = QMP_declare_multiple(inner_list, 1);
    QMP_msghandle_t outer_list[2] = {inner, s};
    QMP_msghandle_t outer = QMP_declare_multiple(outer_list, 2);
    CHECK(inner != NULL && outer != NULL);
    /* A part cannot be freed alone, nor put into another multiple handle. */
    QMP_free_msghandle(r);
    CHECK(QMP_get_error_number(r) == QMP_INVALID_ARG);
    QMP_msghandle_t again[1] = {s};
    CHECK(QMP_declare_multiple(again, 1) == NULL);
    CHECK(QMP_get_error_number(NULL) == QMP_INVALID_ARG);
    /* change_address applies to single handles; the multiple form names every part. */
    CHECK_RC(QMP_change_address(outer, in_a), QMP_INVALID_ARG);
    void* one[1] = {in_a};
    CHECK_RC(QMP_change_address_multiple(outer, one, 1), QMP_INVALID_ARG);
    void* addresses[2] = {in_a, out_a};
    CHECK_OK(QMP_change_address_multiple(outer, addresses, 2));
    CHECK_OK(QMP_start(outer));
    CHECK_OK(QMP_wait(outer));
    CHECK(in_a[5] == prev * 100 + 5);
    /* Freeing the multiple handle frees its parts (ASan sees a leak or a double free). */
    QMP_free_msghandle(outer);
    QMP_free_msgmem(ms);
    QMP_free_msgmem(mr);
}

/* ---- global operations --------------------------------------------------------------------- */

/* The bits of a double must be the same on every node. */
static int same_everywhere(const void* value, size_t bytes) {
    unsigned char* all = malloc(bytes * (size_t)size_);
    MPI_Allgather(value, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, MPI_COMM_WORLD);
    int same = 1;
    for (int r = 1; r < size_; ++r) {
        same = same && memcmp(all, all + bytes * (size_t)r, bytes) == 0;
    }
    free(all);
    return same;
}

/* A 2x2 integer matrix product modulo 1009: not commutative, so the order of the nodes shows. */
typedef struct {
    long m[4];
} Matrix;
static Matrix node_matrix(int node) {
    Matrix a = {{1 + node, 2, node % 3, 1}};
    return a;
}
static void multiply(void* inout, void* in) {
    Matrix* a = inout;
    const Matrix* b = in;
    Matrix c;
    c.m[0] = (a->m[0] * b->m[0] + a->m[1] * b->m[2]) % 1009;
    c.m[1] = (a->m[0] * b->m[1] + a->m[1] * b->m[3]) % 1009;
    c.m[2] = (a->m[2] * b->m[0] + a->m[3] * b->m[2]) % 1009;
    c.m[3] = (a->m[2] * b->m[1] + a->m[3] * b->m[3]) % 1009;
    *a = c;
}

static void test_global(QMP_comm_t comm, int rank, int size, const int* world_ranks) {
    int i_sum = rank + 1;
    CHECK_OK(QMP_comm_sum_int(comm, &i_sum));
    CHECK(i_sum == size * (size + 1) / 2);

    /* Sums whose rounding depends on the order: the same bits everywhere and in every run. */
    double d = (rank % 2 == 0 ? 1e16 : -1e16) + 0.1 * (rank + 1) + 1.0 / 3.0;
    double d_first = d;
    CHECK_OK(QMP_comm_sum_double(comm, &d_first));
    for (int run = 0; run < 5; ++run) {
        double again = d;
        CHECK_OK(QMP_comm_sum_double(comm, &again));
        CHECK(memcmp(&again, &d_first, sizeof again) == 0);
    }
    if (comm == QMP_comm_get_job()) {
        CHECK(same_everywhere(&d_first, sizeof d_first));
    }
    /* Exact when the values are: integers. */
    double exact = rank * 3.0 + 0.5;
    CHECK_OK(QMP_comm_sum_double(comm, &exact));
    CHECK(exact == 3.0 * size * (size - 1) / 2 + 0.5 * size);
    float f = (float)rank + 0.25f;
    CHECK_OK(QMP_comm_sum_float(comm, &f));
    CHECK(f == (float)(size * (size - 1) / 2) + 0.25f * (float)size);

    enum { length = 1000 };
    double da[length];
    float fa[length];
    for (int i = 0; i < length; ++i) {
        da[i] = i * 0.5 + rank;
        fa[i] = (float)i + (float)rank;
    }
    CHECK_OK(QMP_comm_sum_double_array(comm, da, length));
    CHECK_OK(QMP_comm_sum_float_array(comm, fa, length));
    long wrong = 0;
    for (int i = 0; i < length; ++i) {
        wrong += da[i] != i * 0.5 * size + size * (size - 1) / 2.0;
        wrong += fa[i] != (float)(i * size + size * (size - 1) / 2);
    }
    CHECK(wrong == 0);
    CHECK_OK(QMP_comm_sum_double_array(comm, da, 0));

    /* Above 8 KiB a sum takes pmr's allreduce, below it a two-node communicator exchanges the
     * operands: both add x_0 + x_1, so on two nodes element 0 has the bits of d_first. */
    enum { large = 1500 };
    double* dl = malloc(large * sizeof *dl);
    if (CHECK(dl != NULL)) {
        for (int i = 0; i < large; ++i) {
            dl[i] = i == 0 ? d : (double)i + rank;
        }
        CHECK_OK(QMP_comm_sum_double_array(comm, dl, large));
        if (size == 2) {
            CHECK(memcmp(&dl[0], &d_first, sizeof d_first) == 0);
        }
        wrong = 0;
        for (int i = 1; i < large; ++i) {
            wrong += dl[i] != (double)i * size + size * (size - 1) / 2.0;
        }
        CHECK(wrong == 0);
        if (comm == QMP_comm_get_job()) {
            CHECK(same_everywhere(dl, sizeof *dl));
        }
        free(dl);
    }

    /* More kinds of sums than the 64 a communicator keeps: both nodes drop their exchanges at
     * the same call and make them again, then lengths met before the drop anew. Two nodes only:
     * on more, each new pmr collective costs a set-up that oversubscribed runs feel. */
    enum { kinds = 70 };
    double dk[kinds];
    wrong = 0;
    for (int pass = 0; pass < (size == 2 ? 2 : 0); ++pass) {
        for (int n = 1; n <= (pass == 0 ? kinds : 3); ++n) {
            for (int i = 0; i < n; ++i) {
                dk[i] = rank + 2.0 * i;
            }
            CHECK_OK(QMP_comm_sum_double_array(comm, dk, n));
            for (int i = 0; i < n; ++i) {
                wrong += dk[i] != size * (size - 1) / 2.0 + 2.0 * i * size;
            }
        }
    }
    CHECK(wrong == 0);

    double mx = rank == size / 2 ? 7.5 : -(double)rank;
    double mn = rank == size - 1 ? -7.5 : (double)rank;
    float fmx = (float)rank;
    float fmn = (float)(size - rank);
    CHECK_OK(QMP_comm_max_double(comm, &mx));
    CHECK_OK(QMP_comm_min_double(comm, &mn));
    CHECK_OK(QMP_comm_max_float(comm, &fmx));
    CHECK_OK(QMP_comm_min_float(comm, &fmn));
    CHECK(mx == 7.5 && mn == -7.5 && fmx == (float)(size - 1) && fmn == 1.0f);

    unsigned long x = (1UL << (world_ranks[rank] % 60)) | 0x5a00UL * (unsigned long)rank;
    unsigned long expected_x = 0;
    for (int r = 0; r < size; ++r) {
        expected_x ^= (1UL << (world_ranks[r] % 60)) | 0x5a00UL * (unsigned long)r;
    }
    CHECK_OK(QMP_comm_xor_ulong(comm, &x));
    CHECK(x == expected_x);

    long double ld = 0.125L * rank;
    CHECK_OK(QMP_comm_sum_long_double(comm, &ld));
    CHECK(ld == 0.125L * size * (size - 1) / 2);
    double ext = 1.0 + rank;
    CHECK_OK(QMP_comm_sum_double_extended(comm, &ext));
    CHECK(ext == size * (size + 1) / 2.0);

    Matrix product = node_matrix(rank);
    CHECK_OK(QMP_comm_binary_reduction(comm, &product, sizeof product, multiply));
    Matrix expected = node_matrix(0);
    for (int r = 1; r < size; ++r) {
        Matrix next = node_matrix(r);
        multiply(&expected, &next);
    }
    CHECK(memcmp(&product, &expected, sizeof product) == 0);

    char text[100];
    for (int i = 0; i < 100; ++i) {
        text[i] = rank == 0 ? (char)('A' + i % 26) : '?';
    }
    CHECK_OK(QMP_comm_broadcast(comm, text, sizeof text));
    CHECK(text[0] == 'A' && text[27] == 'B' && text[99] == (char)('A' + 99 % 26));
    CHECK_OK(QMP_comm_barrier(comm));
}

/* -qmp-logic-map 1 0 (under --qmp-owns-mpi): axis 1 varies fastest in 2D topologies declared
 * without a map of their own. */
static void test_logic_map(void) {
    QMP_comm_t comm = fresh_comm();
    const int dims[2] = {2, size_ / 2};
    CHECK_OK(QMP_comm_declare_logical_topology(comm, dims, 2));
    const int* c = QMP_comm_get_logical_coordinates(comm);
    CHECK(c != NULL && c[1] == rank_ % (size_ / 2) && c[0] == rank_ / (size_ / 2));
    CHECK_OK(QMP_comm_free(comm));
}

static void test_communicators(void) {
    int world[64];
    for (int i = 0; i < size_ && i < 64; ++i) {
        world[i] = i;
    }
    test_global(QMP_comm_get_job(), rank_, size_, world);
    /* The default-communicator forms on the job communicator. */
    double v = 2.0;
    CHECK_OK(QMP_sum_double(&v));
    CHECK(v == 2.0 * size_);
    CHECK_OK(QMP_barrier());

    /* Even and odd nodes, each ordered backwards by key. */
    QMP_comm_t half = NULL;
    CHECK_OK(QMP_comm_split(QMP_comm_get_job(), rank_ % 2, -rank_, &half));
    if (!CHECK(half != NULL)) {
        return;
    }
    const int members = (size_ + 1 - rank_ % 2) / 2;
    CHECK(QMP_comm_get_number_of_nodes(half) == members);
    CHECK(QMP_comm_get_number_of_colors(half) == (size_ > 1 ? 2 : 1));
    CHECK(QMP_comm_get_color(half) == rank_ % 2 && QMP_comm_get_key(half) == -rank_);
    const int position = QMP_comm_get_node_number(half);
    CHECK(position == members - 1 - rank_ / 2);
    int members_world[64];
    for (int p = 0; p < members; ++p) {
        members_world[p] = rank_ % 2 + 2 * (members - 1 - p);
    }
    test_global(half, position, members, members_world);
    void* handle = NULL;
    CHECK_OK(QMP_get_mpi_comm(half, &handle));
    int mpi_size = 0;
    MPI_Comm_size(*(MPI_Comm*)handle, &mpi_size);
    CHECK(mpi_size == members);
    /* As the default communicator. */
    CHECK_OK(QMP_comm_set_default(half));
    CHECK(QMP_get_number_of_nodes() == members && QMP_get_node_number() == position);
    int one = 1;
    CHECK_OK(QMP_sum_int(&one));
    CHECK(one == members);
    CHECK_OK(QMP_comm_free(half));
    CHECK(QMP_comm_get_default() == QMP_comm_get_job());
    CHECK_RC(QMP_comm_free(half), QMP_INVALID_ARG);
    CHECK_RC(QMP_comm_free(QMP_comm_get_job()), QMP_INVALID_ARG);
}

/* ---- bad arguments ------------------------------------------------------------------------- */

static void test_bad_arguments(void) {
    QMP_comm_t comm = fresh_comm();
    double buffer[4] = {0};
    QMP_msgmem_t m = QMP_declare_msgmem(buffer, sizeof buffer);
    /* No topology, no relative handles. */
    CHECK(QMP_comm_declare_send_relative(comm, m, 0, 1, 0) == NULL);
    CHECK(QMP_get_error_number(NULL) == QMP_NONEIGHBOR_INFO);
    const int wrong_size[2] = {size_ + 1, 1};
    CHECK_RC(QMP_comm_declare_logical_topology(comm, wrong_size, 2), QMP_INVALID_TOPOLOGY);
    CHECK_RC(QMP_comm_declare_logical_topology(comm, NULL, 2), QMP_INVALID_ARG);
    const int zero[2] = {0, size_};
    CHECK_RC(QMP_comm_declare_logical_topology(comm, zero, 2), QMP_INVALID_ARG);
    const int dims[2] = {size_, 1};
    const int bad_map[2] = {0, 0};
    CHECK_RC(QMP_comm_declare_logical_topology_map(comm, dims, 2, bad_map, 2), QMP_INVALID_ARG);
    CHECK_OK(QMP_comm_declare_logical_topology(comm, dims, 2));
    CHECK(QMP_comm_declare_send_relative(comm, m, 2, 1, 0) == NULL);
    CHECK(QMP_get_error_number(NULL) == QMP_INVALID_ARG);
    CHECK(QMP_comm_declare_receive_relative(comm, m, 0, 2, 0) == NULL);
    CHECK(QMP_comm_declare_receive_relative(comm, m, -1, 1, 0) == NULL);
    CHECK(QMP_comm_declare_send_relative(comm, NULL, 0, 1, 0) == NULL);
    CHECK(QMP_comm_declare_send_to(comm, m, size_, 0) == NULL);
    CHECK(QMP_get_error_number(NULL) == QMP_NODE_OUTRANGE);
    CHECK(QMP_declare_receive_from(m, -1, 0) == NULL);
    CHECK(QMP_comm_get_node_number_from(comm, NULL) == -1);
    CHECK(QMP_get_logical_coordinates_from(size_) == NULL);
    /* Memory. */
    CHECK(QMP_declare_msgmem(NULL, 8) == NULL);
    CHECK(QMP_declare_strided_msgmem(buffer, 8, -1, 16) == NULL);
    CHECK(QMP_declare_indexed_msgmem(buffer, NULL, NULL, 8, 2) == NULL);
    CHECK(QMP_declare_strided_array_msgmem(NULL, NULL, NULL, NULL, 0) == NULL);
    CHECK(QMP_allocate_aligned_memory(8, 3, 0) == NULL);
    /* Handles. */
    CHECK_RC(QMP_start(NULL), QMP_INVALID_ARG);
    CHECK_RC(QMP_wait(NULL), QMP_INVALID_ARG);
    CHECK_RC(QMP_wait_all(NULL, 2), QMP_INVALID_ARG);
    CHECK(QMP_is_complete(NULL) == QMP_FALSE);
    CHECK(QMP_declare_multiple(NULL, 0) == NULL);
    CHECK_RC(QMP_change_address(NULL, buffer), QMP_INVALID_ARG);
    /* A handle started twice. */
    QMP_msghandle_t r = QMP_comm_declare_receive_relative(comm, m, 0, -1, 0);
    double out[4] = {1, 2, 3, 4};
    QMP_msgmem_t mo = QMP_declare_msgmem(out, sizeof out);
    QMP_msghandle_t s = QMP_comm_declare_send_relative(comm, mo, 0, 1, 0);
    CHECK(r != NULL && s != NULL);
    CHECK_OK(QMP_start(r));
    CHECK_RC(QMP_start(r), QMP_INVALID_OP);
    CHECK(QMP_get_error_number(r) == QMP_INVALID_OP);
    CHECK(strstr(QMP_get_error_string(r), "QMP_start") != NULL);
    CHECK_OK(QMP_start(s));
    CHECK_OK(QMP_wait(s));
    CHECK_OK(QMP_wait(r));
    CHECK(buffer[3] == 4.0);
    /* Global operations. */
    CHECK_RC(QMP_sum_double_array(NULL, 3), QMP_INVALID_ARG);
    CHECK_RC(QMP_sum_float_array(buffer == NULL ? NULL : (float*)buffer, -1), QMP_INVALID_ARG);
    CHECK_RC(QMP_binary_reduction(buffer, 8, NULL), QMP_INVALID_ARG);
    CHECK_RC(QMP_broadcast(NULL, 8), QMP_INVALID_ARG);
    CHECK_RC(QMP_comm_split(comm, -1, 0, NULL), QMP_INVALID_ARG);
    /* Every status has its own text. */
    for (int code = QMP_ERROR; code < QMP_MAX_STATUS; ++code) {
        const char* text = QMP_error_string((QMP_status_t)code);
        CHECK(text != NULL && text[0] != '\0' && strcmp(text, QMP_error_string(QMP_SUCCESS)) != 0);
        if (code > QMP_ERROR) {
            CHECK(strcmp(text, QMP_error_string((QMP_status_t)(code - 1))) != 0);
        }
    }
    CHECK(strstr(QMP_error_string((QMP_status_t)12345), "unknown") != NULL);
    QMP_free_msghandle(r);
    QMP_free_msghandle(s);
    QMP_free_msgmem(m);
    QMP_free_msgmem(mo);
    CHECK_OK(QMP_comm_free(comm));
}

/* ---- the rest of the machine ---------------------------------------------------------------- */

static void test_misc(void) {
    CHECK(QMP_comm_get_allocated() == QMP_comm_get_job());
    CHECK_OK(QMP_comm_set_allocated(QMP_comm_get_job()));
    CHECK_OK(QMP_comm_set_job(QMP_comm_get_job()));
    CHECK_RC(QMP_comm_set_job(NULL), QMP_INVALID_ARG);
    CHECK_RC(QMP_comm_set_default(NULL), QMP_INVALID_ARG);
    CHECK(QMP_get_number_of_jobs() == 1 && QMP_get_job_number() == 0);
    CHECK(QMP_get_number_of_job_geometry_dimensions() == QMP_get_allocated_number_of_dimensions());
    CHECK(QMP_get_job_geometry() == QMP_get_allocated_dimensions());
    CHECK(QMP_get_SMP_count() == 1 && QMP_io_node(rank_) == rank_ && QMP_master_io_node() == 0);
    CHECK(QMP_profcontrol(1) == 0 && QMP_profcontrol(0) == 1);
    QMP_reset_total_qmp_time();
    CHECK(QMP_get_total_qmp_time() == 0.0);
    /* The job topology (declared by QMP_layout_grid) through the default-communicator forms. */
    int c[MAX_DIMS] = {-1, -1, -1, -1};
    QMP_get_logical_coordinates_from2(c, rank_);
    CHECK(QMP_get_node_number_from(c) == rank_);
    int* from = QMP_get_logical_coordinates_from(rank_);
    CHECK(from != NULL && memcmp(from, QMP_get_logical_coordinates(), sizeof c) == 0);
    free(from);
    /* Arrays of long doubles and the default-communicator relative handles. */
    long double ld[3] = {1.0L * rank_, 2.0L, -0.5L};
    CHECK_OK(QMP_sum_long_double_array(ld, 3));
    CHECK(ld[0] == 0.5L * size_ * (size_ - 1) && ld[1] == 2.0L * size_ && ld[2] == -0.5L * size_);
    int out = rank_;
    int in = -1;
    QMP_msgmem_t mo = QMP_declare_msgmem(&out, sizeof out);
    QMP_msgmem_t mi = QMP_declare_msgmem(&in, sizeof in);
    QMP_msghandle_t s = QMP_declare_send_relative(mo, 0, +1, 0);
    QMP_msghandle_t r = QMP_declare_receive_relative(mi, 0, -1, 0);
    CHECK_OK(QMP_start(s));
    CHECK_OK(QMP_start(r));
    QMP_msghandle_t both[2] = {r, s};
    CHECK_OK(QMP_wait_all(both, 2));
    CHECK(in == (rank_ + size_ - 1) % size_);
    QMP_free_msghandle(s);
    QMP_free_msghandle(r);
    QMP_free_msgmem(mo);
    QMP_free_msgmem(mi);
    CHECK(QMP_error("QMP_error to stderr\n") > 0);
}

/* ---- output -------------------------------------------------------------------------------- */

static void test_output(void) {
    FILE* file = tmpfile();
    if (!CHECK(file != NULL)) {
        return;
    }
    const int n = QMP_fprintf(file, "value %d\n", 42);
    rewind(file);
    char line[512] = {0};
    CHECK(fgets(line, sizeof line, file) != NULL);
    fclose(file);
    char prefix[64];
    snprintf(prefix, sizeof prefix, "QMP m%d,n%d@", rank_, size_);
    CHECK(strncmp(line, prefix, strlen(prefix)) == 0);
    CHECK(strstr(line, ": value 42\n") != NULL);
    CHECK(n == (int)strlen(line));
    CHECK(QMP_printf("QMP_printf from every node\n") > 0);
    CHECK(QMP_info("QMP_info\n") > 0);
}

int main(int argc, char** argv) {
    int owns_mpi = 0;
    for (int i = 1; i < argc; ++i) {
        owns_mpi = owns_mpi || strcmp(argv[i], "--qmp-owns-mpi") == 0;
    }
    QMP_thread_level_t provided = QMP_THREAD_MULTIPLE;
    char* made_up[12];
    if (!owns_mpi) {
        /* MPI first, as QUDA-style programs do; QMP must leave it running at the end. */
        MPI_Init(&argc, &argv);
        MPI_Comm_size(MPI_COMM_WORLD, &size_);
        MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
        static char size_text[16];
        snprintf(size_text, sizeof size_text, "%d", size_);
        int n = 0;
        made_up[n++] = argv[0];
        made_up[n++] = "-qmp-geom";
        made_up[n++] = size_text;
        made_up[n++] = "-keep-me";
        made_up[n++] = "-qmp-alloc-map";
        made_up[n++] = "0";
        made_up[n] = NULL;
        argc = n;
        argv = made_up;
    }
    const QMP_status_t rc = QMP_init_msg_passing(&argc, &argv, QMP_THREAD_SINGLE, &provided);
    if (owns_mpi) {
        MPI_Comm_size(MPI_COMM_WORLD, &size_);
        MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
        /* --qmp-owns-mpi stays: it is not QMP's. */
        CHECK(argc == 2 && strcmp(argv[1], "--qmp-owns-mpi") == 0);
    }
    CHECK_OK(rc);
    CHECK(provided == QMP_THREAD_SINGLE);

    test_machine(owns_mpi, argc, argv);
    test_layout_from_geometry();
    test_layout_automatic();
    test_topologies();
    if (owns_mpi && size_ >= 4 && size_ % 2 == 0) {
        test_logic_map();
    }
    test_memory_layouts();
    test_change_address();
    test_communicators();
    test_bad_arguments();
    test_misc();
    test_output();

    const int status = check_finish("test_qmp");
    QMP_finalize_msg_passing();
    CHECK(QMP_is_initialized() == QMP_FALSE);
    if (!owns_mpi) {
        int finalized = 1;
        MPI_Finalized(&finalized);
        CHECK(finalized == 0);
        MPI_Finalize();
    }
    return status != 0 || check_failures != 0 ? 1 : 0;
}
