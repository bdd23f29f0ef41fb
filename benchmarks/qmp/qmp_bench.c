/* SPDX-License-Identifier: MIT */
/* qmp-bench: QMP on pmr against what USQCD's QMP does over MPI, in one run.
 *
 *   halo:  a 4D halo round (8 faces, both neighbours on every axis of a periodic grid) through
 *          QMP relative handles combined by QMP_declare_multiple (QMP_start + QMP_wait), against
 *          the same messages on MPI persistent requests (MPI_Startall + MPI_Waitall), as QMP's MPI
 *          build runs them.
 *   sum:   QMP_sum_double against MPI_Allreduce of one double.
 *
 *   mpirun -np 2 qmp-bench [--grid x y z t] [--min B] [--max B] [--rounds N] [--reps R]
 *                          [--strided S]
 *
 * --strided S sends every face from strided memory, blocks of S bytes every 2S bytes (QMP
 * strided message memory, packed by QMP; an MPI vector type on MPI's side), as a code sends a
 * face straight out of its field; receives stay contiguous. Without it faces are contiguous
 * QMP_allocate_memory buffers, which pmr sends without a copy of QMP's.
 *
 * The methods take turns in every repetition and each reports its fastest repetition; the ratio
 * MPI time / QMP time above 1 means QMP on pmr is faster. The halo data is checked once per size.
 * Output: one line per face size, then the sum. */
#include <qmp.h>

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DIMS 4

typedef struct {
    int grid[DIMS];
    size_t min_bytes;
    size_t max_bytes;
    int rounds;
    int reps;
    size_t strided; /* block bytes of strided faces; 0: contiguous */
} Options;

static int parse(int argc, char** argv, Options* o) {
    for (int i = 1; i < argc; ++i) {
        if (strcmp(argv[i], "--grid") == 0 && i + DIMS < argc) {
            for (int d = 0; d < DIMS; ++d) {
                o->grid[d] = atoi(argv[++i]);
            }
        } else if (strcmp(argv[i], "--min") == 0 && i + 1 < argc) {
            o->min_bytes = (size_t)atol(argv[++i]);
        } else if (strcmp(argv[i], "--max") == 0 && i + 1 < argc) {
            o->max_bytes = (size_t)atol(argv[++i]);
        } else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) {
            o->rounds = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
            o->reps = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--strided") == 0 && i + 1 < argc) {
            o->strided = (size_t)atol(argv[++i]);
        } else {
            return 0;
        }
    }
    /* Every size (min_bytes times a power of 2) must be a whole number of strided blocks. */
    return o->min_bytes > 0 && o->max_bytes >= o->min_bytes && o->rounds > 0 && o->reps > 0 &&
           (o->strided == 0 || o->min_bytes % o->strided == 0);
}

/* The faces of one size, for both methods. */
typedef struct {
    size_t bytes;
    size_t send_bytes; /* of each send buffer: twice the face when strided */
    size_t strided;    /* block bytes of strided faces; 0: contiguous */
    MPI_Datatype face; /* MPI's type of a sent face (MPI_BYTE when contiguous) */
    int face_count;
    char* send[2 * DIMS];
    char* recv[2 * DIMS];
    QMP_msgmem_t mem[4 * DIMS];
    QMP_msghandle_t halo;
    MPI_Request requests[4 * DIMS];
    /* Not MPI_STATUSES_IGNORE: GCC takes MPICH's constant for an empty array. */
    MPI_Status statuses[4 * DIMS];
} Faces;

static int neighbour(const int* me, int axis, int dir) {
    int c[DIMS];
    memcpy(c, me, sizeof c);
    c[axis] += dir;
    return QMP_get_node_number_from(c);
}

static void setup(Faces* f, size_t bytes, size_t strided, MPI_Comm comm) {
    const int* me = QMP_get_logical_coordinates();
    QMP_msghandle_t h[4 * DIMS];
    f->bytes = bytes;
    f->send_bytes = strided > 0 ? 2 * bytes : bytes;
    f->strided = strided;
    f->face = MPI_BYTE;
    f->face_count = (int)bytes;
    if (strided > 0) {
        MPI_Type_vector((int)(bytes / strided), (int)strided, (int)(2 * strided), MPI_BYTE,
                        &f->face);
        MPI_Type_commit(&f->face);
        f->face_count = 1;
    }
    for (int face = 0; face < 2 * DIMS; ++face) {
        const int axis = face / 2;
        const int dir = face % 2 == 0 ? -1 : +1;
        /* freed at exit */
        f->send[face] = QMP_get_memory_pointer(QMP_allocate_memory(f->send_bytes));
        f->recv[face] = QMP_get_memory_pointer(QMP_allocate_memory(bytes));
        f->mem[2 * face] =
            strided > 0 ? QMP_declare_strided_msgmem(f->send[face], strided, (int)(bytes / strided),
                                                     (ptrdiff_t)(2 * strided))
                        : QMP_declare_msgmem(f->send[face], bytes);
        f->mem[2 * face + 1] = QMP_declare_msgmem(f->recv[face], bytes);
        h[2 * face] = QMP_declare_send_relative(f->mem[2 * face], axis, dir, 0);
        h[2 * face + 1] = QMP_declare_receive_relative(f->mem[2 * face + 1], axis, dir, 0);
        /* MPI: the message towards dir carries tag 2 axis + (dir > 0) on both sides. */
        const int tag_out = 2 * axis + (dir > 0);
        const int tag_in = 2 * axis + (dir < 0);
        MPI_Send_init(f->send[face], f->face_count, f->face, neighbour(me, axis, dir), tag_out,
                      comm, &f->requests[2 * face]);
        MPI_Recv_init(f->recv[face], (int)bytes, MPI_BYTE, neighbour(me, axis, dir), tag_in, comm,
                      &f->requests[2 * face + 1]);
    }
    f->halo = QMP_declare_multiple(h, 4 * DIMS);
}

static void teardown(Faces* f) {
    QMP_free_msghandle(f->halo);
    for (int i = 0; i < 4 * DIMS; ++i) {
        QMP_free_msgmem(f->mem[i]);
        MPI_Request_free(&f->requests[i]);
    }
    if (f->face != MPI_BYTE) {
        MPI_Type_free(&f->face);
    }
}

static void fill(Faces* f, int node, int round) {
    for (int face = 0; face < 2 * DIMS; ++face) {
        const int value = (node * 16 + face + round) & 0xff;
        if (f->strided > 0) {
            /* The gaps between the blocks hold what no face holds: sent, they show. */
            memset(f->send[face], (value + 128) & 0xff, f->send_bytes);
            for (size_t b = 0; b < f->bytes / f->strided; ++b) {
                memset(f->send[face] + 2 * b * f->strided, value, f->strided);
            }
        } else {
            memset(f->send[face], value, f->bytes);
        }
        memset(f->recv[face], 0, f->bytes);
    }
}

/* Whether every face holds what the neighbour there sent towards us. */
static int verify(const Faces* f, int round) {
    const int* me = QMP_get_logical_coordinates();
    for (int face = 0; face < 2 * DIMS; ++face) {
        const int axis = face / 2;
        const int dir = face % 2 == 0 ? -1 : +1;
        const int from = neighbour(me, axis, dir);
        const int their_face = 2 * axis + (dir < 0 ? 1 : 0);
        const char expected = (char)((from * 16 + their_face + round) & 0xff);
        for (size_t i = 0; i < f->bytes; ++i) {
            if (f->recv[face][i] != expected) {
                return 0;
            }
        }
    }
    return 1;
}

static double time_qmp(Faces* f, int rounds) {
    QMP_barrier();
    const double t = MPI_Wtime();
    for (int r = 0; r < rounds; ++r) {
        QMP_start(f->halo);
        QMP_wait(f->halo);
    }
    return (MPI_Wtime() - t) / rounds;
}

static double time_mpi(Faces* f, int rounds) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double t = MPI_Wtime();
    for (int r = 0; r < rounds; ++r) {
        MPI_Startall(4 * DIMS, f->requests);
        MPI_Waitall(4 * DIMS, f->requests, f->statuses);
    }
    return (MPI_Wtime() - t) / rounds;
}

/* The slowest node's time. */
static double slowest(double t) {
    double max = 0.0;
    MPI_Allreduce(&t, &max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return max;
}

int main(int argc, char** argv) {
    QMP_thread_level_t provided;
    if (QMP_init_msg_passing(&argc, &argv, QMP_THREAD_SINGLE, &provided) != QMP_SUCCESS) {
        fprintf(stderr, "qmp-bench: %s\n", QMP_get_error_string(NULL));
        return 1;
    }
    const int nodes = QMP_get_number_of_nodes();
    const int node = QMP_get_node_number();
    Options o = {{0, 0, 0, 0}, 1024, 65536, 2000, 5, 0};
    if (!parse(argc, argv, &o)) {
        if (node == 0) {
            fprintf(stderr, "usage: qmp-bench [--grid x y z t] [--min B] [--max B] [--rounds N] "
                            "[--reps R] [--strided S]\n");
        }
        QMP_finalize_msg_passing();
        return 2;
    }
    MPI_Dims_create(nodes, DIMS, o.grid);
    if (QMP_declare_logical_topology(o.grid, DIMS) != QMP_SUCCESS) {
        fprintf(stderr, "qmp-bench: %s\n", QMP_get_error_string(NULL));
        QMP_finalize_msg_passing();
        return 1;
    }
    /* MPI's messages on a communicator of their own, as QMP's MPI build keeps them. */
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    if (node == 0) {
        printf("qmp-bench: %d nodes as a %d x %d x %d x %d periodic grid; %d rounds x %d reps, "
               "fastest rep, slowest node\n",
               nodes, o.grid[0], o.grid[1], o.grid[2], o.grid[3], o.rounds, o.reps);
        if (o.strided > 0) {
            printf("faces sent from strided memory: blocks of %zu B every %zu B\n", o.strided,
                   2 * o.strided);
        }
        printf("%10s %14s %14s %12s %8s\n", "face B", "QMP/pmr us", "MPI persist us", "MPI/QMP",
               "check");
    }
    int failures = 0;
    for (size_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= 2) {
        Faces f;
        setup(&f, bytes, o.strided, comm);
        /* Warm up both (pmr's handshakes happen at the first round), then check the data. */
        fill(&f, node, 1);
        QMP_start(f.halo);
        QMP_wait(f.halo);
        int ok = verify(&f, 1);
        fill(&f, node, 2);
        MPI_Startall(4 * DIMS, f.requests);
        MPI_Waitall(4 * DIMS, f.requests, f.statuses);
        ok = ok && verify(&f, 2);
        int all_ok = 0;
        MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
        failures += !all_ok;
        double best_qmp = 1e30;
        double best_mpi = 1e30;
        for (int rep = 0; rep < o.reps; ++rep) {
            const double q = slowest(time_qmp(&f, o.rounds));
            const double m = slowest(time_mpi(&f, o.rounds));
            best_qmp = q < best_qmp ? q : best_qmp;
            best_mpi = m < best_mpi ? m : best_mpi;
        }
        if (node == 0) {
            printf("%10zu %14.3f %14.3f %12.2f %8s\n", bytes, best_qmp * 1e6, best_mpi * 1e6,
                   best_mpi / best_qmp, all_ok ? "ok" : "WRONG");
        }
        teardown(&f);
    }

    /* QMP_sum_double against MPI_Allreduce. */
    double best_qmp = 1e30;
    double best_mpi = 1e30;
    const int sums = o.rounds * 5;
    double value = node;
    QMP_sum_double(&value);
    int sum_ok = value == (double)nodes * (nodes - 1) / 2;
    for (int rep = 0; rep < o.reps; ++rep) {
        QMP_barrier();
        double t = MPI_Wtime();
        for (int i = 0; i < sums; ++i) {
            value = node;
            QMP_sum_double(&value);
        }
        const double q = slowest((MPI_Wtime() - t) / sums);
        MPI_Barrier(MPI_COMM_WORLD);
        t = MPI_Wtime();
        double in = 0.0;
        for (int i = 0; i < sums; ++i) {
            in = node;
            MPI_Allreduce(MPI_IN_PLACE, &in, 1, MPI_DOUBLE, MPI_SUM, comm);
        }
        const double m = slowest((MPI_Wtime() - t) / sums);
        sum_ok = sum_ok && value == in;
        best_qmp = q < best_qmp ? q : best_qmp;
        best_mpi = m < best_mpi ? m : best_mpi;
    }
    if (node == 0) {
        printf("%10s %14.3f %14.3f %12.2f %8s   (QMP_sum_double / MPI_Allreduce = %.2f)\n", "sum",
               best_qmp * 1e6, best_mpi * 1e6, best_mpi / best_qmp, sum_ok ? "ok" : "WRONG",
               best_qmp / best_mpi);
    }
    failures += !sum_ok;
    MPI_Comm_free(&comm);
    QMP_finalize_msg_passing();
    return failures == 0 ? 0 : 1;
}
