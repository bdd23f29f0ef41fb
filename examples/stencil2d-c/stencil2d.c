/* SPDX-License-Identifier: MIT */
/* pmr-stencil2d-c: a 2D heat solver (Jacobi iteration, 5-point stencil) in C on a Cartesian grid
 * of ranks, through pmr's C interface (pmr/pmr.h). The same solve runs twice, with the halos
 * exchanged by persistent MPI requests and by pmr windows; the two final fields must be equal bit
 * for bit (exit code 1 otherwise).
 *
 * Every rank owns nx x ny cells plus one ghost layer, stored row by row (y contiguous). The two
 * faces normal to x are rows: contiguous, so the windows lie directly over the field (user
 * buffers, no copy). The two faces normal to y are columns: they are packed into library-owned
 * windows and unpacked from them. At a non-periodic border the neighbour is MPI_PROC_NULL, its
 * connection a null connection, and the ghosts keep their initial values (a fixed boundary).
 *
 *     mpirun -np 4 pmr-stencil2d-c --size 256 --iterations 500 --periodic 1
 */
#include <pmr/pmr.h>

#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { faces = 4 }; /* 0: -x, 1: +x, 2: -y, 3: +y */

typedef struct {
    int size[2];
    int grid[2];
    int periodic[2];
    int iterations;
    int repeat;
} Options;

typedef struct {
    int n[2];     /* interior cells */
    size_t row;   /* stride of x: ny + 2 */
    double* u;    /* (nx + 2) x (ny + 2), ghosts included */
    double* next; /* the new values of the interior */
    int coord[2];
    int extent[2];
    int neighbor[faces];
} Field;

static int rank = 0;

/* Ends the job with the message of the failed pmr call. */
static void check(int rc, const char* call) {
    if (rc != PMR_SUCCESS) {
        fprintf(stderr, "rank %d: %s failed with %s: %s\n", rank, call, pmr_error_name(rc),
                pmr_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}
#define PMR_CHECK(call) check((call), #call)

static int dimension_of(int face) {
    return face / 2;
}
static int direction_of(int face) {
    return face % 2 == 0 ? -1 : +1;
}

/* ------------------------------------------------------------------------------------------- */
/* Command line                                                                                  */
/* ------------------------------------------------------------------------------------------- */

static const char* const usage =
    "usage: mpirun -np P pmr-stencil2d-c [options]\n"
    "\n"
    "2D Jacobi heat solver in C with halos exchanged by persistent MPI requests and by pmr\n"
    "windows (C interface); checks that both give bitwise equal results.\n"
    "\n"
    "options:\n"
    "  --size N|NX,NY      cells per rank (default 128)\n"
    "  --grid PX,PY        ranks per dimension, 0 = chosen by MPI_Dims_create (default 0,0)\n"
    "  --periodic P|PX,PY  1 = periodic dimension, 0 = fixed boundary (default 0)\n"
    "  --iterations N      Jacobi iterations (default 100)\n"
    "  --repeat N          solve N times with each, alternating MPI and pmr; the fastest of\n"
    "                      each counts (default 1)\n"
    "  --help              print this text\n";

/* "8" or "8,4" into two values in [minimum, maximum]; 0 on a malformed value. */
static int parse_pair(const char* text, int values[2], long minimum, long maximum) {
    char* end = NULL;
    int i;
    for (i = 0; i < 2; ++i) {
        const long value = strtol(text, &end, 10);
        if (end == text || value < minimum || value > maximum) {
            return 0;
        }
        values[i] = (int)value;
        if (*end == '\0') {
            if (i == 0) {
                values[1] = values[0];
            }
            return 1;
        }
        if (*end != ',' || i == 1) {
            return 0;
        }
        text = end + 1;
    }
    return 0;
}

/* 1: run, 0: --help printed, -1: error printed. */
static int parse_options(int argc, char** argv, Options* options) {
    int i;
    options->size[0] = options->size[1] = 128;
    options->grid[0] = options->grid[1] = 0;
    options->periodic[0] = options->periodic[1] = 0;
    options->iterations = 100;
    options->repeat = 1;
    for (i = 1; i < argc; ++i) {
        const char* name = argv[i];
        const char* value = NULL;
        const char* equals = strchr(name, '=');
        char option[32];
        int pair[2];
        if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0) {
            if (rank == 0) {
                fputs(usage, stdout);
            }
            return 0;
        }
        if (equals != NULL && (size_t)(equals - name) < sizeof option) {
            memcpy(option, name, (size_t)(equals - name));
            option[equals - name] = '\0';
            name = option;
            value = equals + 1;
        } else if (i + 1 < argc) {
            value = argv[++i];
        }
        if (value == NULL) {
            break;
        }
        if (strcmp(name, "--size") == 0 && parse_pair(value, pair, 1, 1 << 14)) {
            memcpy(options->size, pair, sizeof pair);
        } else if (strcmp(name, "--grid") == 0 && parse_pair(value, pair, 0, 1 << 20)) {
            memcpy(options->grid, pair, sizeof pair);
        } else if (strcmp(name, "--periodic") == 0 && parse_pair(value, pair, 0, 1)) {
            memcpy(options->periodic, pair, sizeof pair);
        } else if (strcmp(name, "--iterations") == 0 && parse_pair(value, pair, 0, 1 << 30) &&
                   strchr(value, ',') == NULL) {
            options->iterations = pair[0];
        } else if (strcmp(name, "--repeat") == 0 && parse_pair(value, pair, 1, 1000) &&
                   strchr(value, ',') == NULL) {
            options->repeat = pair[0];
        } else {
            if (rank == 0) {
                fprintf(stderr, "pmr-stencil2d-c: bad option or value: %s %s\n%s", name, value,
                        usage);
            }
            return -1;
        }
    }
    if (i < argc) {
        if (rank == 0) {
            fprintf(stderr, "pmr-stencil2d-c: %s needs a value\n%s", argv[i], usage);
        }
        return -1;
    }
    return 1;
}

/* ------------------------------------------------------------------------------------------- */
/* The field                                                                                     */
/* ------------------------------------------------------------------------------------------- */

static size_t at(const Field* f, int i, int j) {
    return (size_t)i * f->row + (size_t)j;
}

/* A smooth but direction-dependent start on global coordinates: a halo sent the wrong way or to
 * the wrong rank changes the result. */
static double initial_value(long x, long y) {
    const double fx = (double)x;
    const double fy = (double)y;
    return sin(0.31 * fx + 0.17) * cos(0.23 * fy - 0.4) + 0.5 * sin(0.07 * fx * fy + 0.11 * fy);
}

/* Fills the whole field, ghosts included: at a fixed boundary the ghost value stays forever. */
static void initialize(Field* f) {
    int i;
    int j;
    for (i = 0; i <= f->n[0] + 1; ++i) {
        for (j = 0; j <= f->n[1] + 1; ++j) {
            f->u[at(f, i, j)] = initial_value((long)f->coord[0] * f->n[0] + i - 1,
                                              (long)f->coord[1] * f->n[1] + j - 1);
        }
    }
}

/* One Jacobi step of the interior from the current ghosts. */
static void update(Field* f) {
    const int nx = f->n[0];
    const int ny = f->n[1];
    int i;
    int j;
    for (i = 1; i <= nx; ++i) {
        for (j = 1; j <= ny; ++j) {
            const double* u = f->u;
            f->next[(size_t)(i - 1) * (size_t)ny + (size_t)(j - 1)] =
                0.2 * (u[at(f, i, j)] + u[at(f, i - 1, j)] + u[at(f, i + 1, j)] +
                       u[at(f, i, j - 1)] + u[at(f, i, j + 1)]);
        }
    }
    for (i = 1; i <= nx; ++i) {
        memcpy(&f->u[at(f, i, 1)], &f->next[(size_t)(i - 1) * (size_t)ny],
               (size_t)ny * sizeof(double));
    }
}

/* The interior row or column next to `face` (layer 1 or n) or the ghost one (layer 0 or n + 1). */
static size_t face_start(const Field* f, int face, int ghost) {
    const int d = dimension_of(face);
    const int layer = direction_of(face) < 0 ? (ghost ? 0 : 1) : (ghost ? f->n[d] + 1 : f->n[d]);
    return d == 0 ? at(f, layer, 1) : at(f, 1, layer);
}

static void pack_column(const Field* f, int face, double* buffer) {
    const size_t start = face_start(f, face, 0);
    int i;
    for (i = 0; i < f->n[0]; ++i) {
        buffer[i] = f->u[start + (size_t)i * f->row];
    }
}

static void unpack_column(Field* f, int face, const double* buffer) {
    const size_t start = face_start(f, face, 1);
    int i;
    for (i = 0; i < f->n[0]; ++i) {
        f->u[start + (size_t)i * f->row] = buffer[i];
    }
}

/* ------------------------------------------------------------------------------------------- */
/* Halo exchange with persistent MPI requests: the reference                                     */
/* ------------------------------------------------------------------------------------------- */

typedef struct {
    MPI_Request requests[2 * faces]; /* receives first */
    double* columns[2][faces];       /* [0]: send, [1]: receive buffers of the y faces */
} MpiHalo;

static void mpi_halo_create(MpiHalo* h, Field* f, MPI_Comm comm) {
    int face;
    for (face = 0; face < faces; ++face) {
        /* The tag is the face a message leaves through: between the two neighbours of a periodic
         * extent of 2 (the same rank twice) or 1 (this rank) only the tag tells them apart. */
        const int opposite = face ^ 1;
        if (dimension_of(face) == 0) {
            h->columns[0][face] = h->columns[1][face] = NULL;
            MPI_Recv_init(&f->u[face_start(f, face, 1)], f->n[1], MPI_DOUBLE, f->neighbor[face],
                          opposite, comm, &h->requests[face]);
            MPI_Send_init(&f->u[face_start(f, face, 0)], f->n[1], MPI_DOUBLE, f->neighbor[face],
                          face, comm, &h->requests[faces + face]);
        } else {
            h->columns[0][face] = (double*)malloc((size_t)f->n[0] * sizeof(double));
            h->columns[1][face] = (double*)malloc((size_t)f->n[0] * sizeof(double));
            MPI_Recv_init(h->columns[1][face], f->n[0], MPI_DOUBLE, f->neighbor[face], opposite,
                          comm, &h->requests[face]);
            MPI_Send_init(h->columns[0][face], f->n[0], MPI_DOUBLE, f->neighbor[face], face, comm,
                          &h->requests[faces + face]);
        }
    }
}

static void mpi_halo_exchange(MpiHalo* h, Field* f) {
    /* Statuses rather than MPI_STATUSES_IGNORE: GCC 12 misreads MPICH's (MPI_Status*)1. */
    MPI_Status statuses[2 * faces];
    int face;
    for (face = 2; face < faces; ++face) {
        pack_column(f, face, h->columns[0][face]);
    }
    MPI_Startall(2 * faces, h->requests);
    MPI_Waitall(2 * faces, h->requests, statuses);
    for (face = 2; face < faces; ++face) {
        if (f->neighbor[face] != MPI_PROC_NULL) {
            unpack_column(f, face, h->columns[1][face]);
        }
    }
}

static void mpi_halo_free(MpiHalo* h) {
    int i;
    for (i = 0; i < 2 * faces; ++i) {
        MPI_Request_free(&h->requests[i]);
    }
    for (i = 0; i < faces; ++i) {
        free(h->columns[0][i]);
        free(h->columns[1][i]);
    }
}

/* ------------------------------------------------------------------------------------------- */
/* Halo exchange with pmr                                                                        */
/* ------------------------------------------------------------------------------------------- */

typedef struct {
    pmr_connection connections[faces];
    pmr_send_window sends[faces];
    pmr_recv_window recvs[faces];
} PmrHalo;

static void pmr_halo_create(PmrHalo* h, Field* f, pmr_communicator cart) {
    int face;
    for (face = 0; face < faces; ++face) {
        /* The neighbour's connection of the opposite direction pairs with this one, also when
         * both are the same rank or this rank itself. */
        PMR_CHECK(pmr_connection_create_neighbor(cart, dimension_of(face), direction_of(face), 0,
                                                 &h->connections[face]));
    }
    for (face = 0; face < faces; ++face) {
        if (dimension_of(face) == 0) {
            /* Rows are contiguous: windows straight over the field. */
            const size_t bytes = (size_t)f->n[1] * sizeof(double);
            PMR_CHECK(pmr_send_window_create(h->connections[face], &f->u[face_start(f, face, 0)],
                                             bytes, &h->sends[face]));
            PMR_CHECK(pmr_recv_window_create(h->connections[face], &f->u[face_start(f, face, 1)],
                                             bytes, &h->recvs[face]));
        } else {
            /* Columns are strided: packed into library-owned windows, the fastest memory. */
            const size_t bytes = (size_t)f->n[0] * sizeof(double);
            PMR_CHECK(pmr_send_window_create(h->connections[face], NULL, bytes, &h->sends[face]));
            PMR_CHECK(pmr_recv_window_create(h->connections[face], NULL, bytes, &h->recvs[face]));
        }
    }
}

static void pmr_halo_exchange(PmrHalo* h, Field* f) {
    int face;
    /* Grant every receive buffer first, so that data can flow while we pack. */
    for (face = 0; face < faces; ++face) {
        PMR_CHECK(pmr_recv_window_init(h->recvs[face]));
    }
    for (face = 0; face < faces; ++face) {
        size_t bytes = 0;
        if (dimension_of(face) == 1) {
            pack_column(f, face, (double*)pmr_send_window_data(h->sends[face]));
        }
        PMR_CHECK(pmr_send_window_size(h->sends[face], &bytes));
        PMR_CHECK(pmr_send_window_init(h->sends[face]));
        PMR_CHECK(pmr_send_window_post(h->sends[face], bytes));
    }
    for (face = 0; face < faces; ++face) {
        PMR_CHECK(pmr_recv_window_post(h->recvs[face]));
    }
    for (face = 0; face < faces; ++face) {
        PMR_CHECK(pmr_send_window_wait(h->sends[face]));
    }
    for (face = 0; face < faces; ++face) {
        PMR_CHECK(pmr_recv_window_wait(h->recvs[face]));
        /* Rows arrived in place; a null connection delivers nothing. */
        if (dimension_of(face) == 1 && f->neighbor[face] != MPI_PROC_NULL) {
            unpack_column(f, face, (const double*)pmr_recv_window_data(h->recvs[face]));
        }
    }
}

static void pmr_halo_free(PmrHalo* h) {
    int face;
    for (face = 0; face < faces; ++face) {
        PMR_CHECK(pmr_send_window_destroy(&h->sends[face]));
        PMR_CHECK(pmr_recv_window_destroy(&h->recvs[face]));
        PMR_CHECK(pmr_connection_destroy(&h->connections[face]));
    }
}

/* ------------------------------------------------------------------------------------------- */

static void field_create(Field* f, const Options* o, pmr_communicator cart) {
    int face;
    f->n[0] = o->size[0];
    f->n[1] = o->size[1];
    f->row = (size_t)f->n[1] + 2;
    f->u = (double*)malloc((size_t)(f->n[0] + 2) * f->row * sizeof(double));
    f->next = (double*)malloc((size_t)f->n[0] * (size_t)f->n[1] * sizeof(double));
    if (f->u == NULL || f->next == NULL) {
        fprintf(stderr, "rank %d: out of memory\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    PMR_CHECK(pmr_communicator_grid(cart, 2, f->extent, NULL, f->coord));
    for (face = 0; face < faces; ++face) {
        PMR_CHECK(pmr_communicator_neighbor(cart, dimension_of(face), direction_of(face),
                                            &f->neighbor[face]));
    }
}

int main(int argc, char** argv) {
    Options options;
    pmr_communicator cart = NULL;
    MPI_Comm comm = MPI_COMM_NULL;
    Field reference;
    Field field;
    MpiHalo mpi;
    PmrHalo halo;
    double seconds[4]; /* per solve: MPI whole, pmr whole, MPI exchange, pmr exchange */
    double slowest[4];
    double best[4] = {1e300, 1e300, 0.0, 0.0};
    double before;
    int round;
    double checksum = 0.0;
    double total = 0.0;
    int equal;
    int all_equal = 0;
    int parsed;
    int it;
    int i;
    int j;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    parsed = parse_options(argc, argv, &options);
    if (parsed <= 0) {
        MPI_Finalize();
        return parsed == 0 ? 0 : 2;
    }
    PMR_CHECK(pmr_communicator_create(MPI_COMM_WORLD, 2, options.grid, options.periodic, 0, &cart));
    PMR_CHECK(pmr_communicator_comm(cart, &comm));

    /* Both halos are made once, as applications do; the solves alternate so that a busy machine
     * slows both alike, and the fastest of each counts. Two clock reads per iteration (some 50 ns)
     * tell the exchange from the compute. */
    field_create(&reference, &options, cart);
    field_create(&field, &options, cart);
    mpi_halo_create(&mpi, &reference, comm);
    pmr_halo_create(&halo, &field, cart);
    pmr_halo_exchange(&halo, &field); /* the first use completes the set-up: not timed */
    for (round = 0; round < options.repeat; ++round) {
        initialize(&reference);
        initialize(&field);
        seconds[2] = seconds[3] = 0.0;
        MPI_Barrier(comm);
        seconds[0] = MPI_Wtime();
        for (it = 0; it < options.iterations; ++it) {
            before = MPI_Wtime();
            mpi_halo_exchange(&mpi, &reference);
            seconds[2] += MPI_Wtime() - before;
            update(&reference);
        }
        seconds[0] = MPI_Wtime() - seconds[0];
        MPI_Barrier(comm);
        seconds[1] = MPI_Wtime();
        for (it = 0; it < options.iterations; ++it) {
            before = MPI_Wtime();
            pmr_halo_exchange(&halo, &field);
            seconds[3] += MPI_Wtime() - before;
            update(&field);
        }
        seconds[1] = MPI_Wtime() - seconds[1];
        MPI_Allreduce(seconds, slowest, 4, MPI_DOUBLE, MPI_MAX, comm);
        for (i = 0; i < 2; ++i) {
            if (slowest[i] < best[i]) {
                best[i] = slowest[i];
                best[i + 2] = slowest[i + 2];
            }
        }
    }
    mpi_halo_free(&mpi);
    pmr_halo_free(&halo);

    equal = 1;
    for (i = 1; i <= field.n[0]; ++i) {
        for (j = 1; j <= field.n[1]; ++j) {
            const double a = reference.u[at(&reference, i, j)];
            const double b = field.u[at(&field, i, j)];
            equal = equal && memcmp(&a, &b, sizeof a) == 0;
            checksum += b;
        }
    }
    MPI_Allreduce(&equal, &all_equal, 1, MPI_INT, MPI_LAND, comm);
    MPI_Allreduce(&checksum, &total, 1, MPI_DOUBLE, MPI_SUM, comm);
    if (rank == 0) {
        printf("pmr-stencil2d-c: grid %d x %d of %d x %d cells, periodic %d,%d, %d iterations\n",
               reference.extent[0], reference.extent[1], options.size[0], options.size[1],
               options.periodic[0], options.periodic[1], options.iterations);
        printf("  MPI persistent: %.6f s   pmr: %.6f s   MPI / pmr: %.2f\n", best[0], best[1],
               best[1] > 0 ? best[0] / best[1] : 0.0);
        printf("  exchange share of the iteration: MPI %.1f %%, pmr %.1f %%%s\n",
               best[0] > 0 ? 100.0 * best[2] / best[0] : 0.0,
               best[1] > 0 ? 100.0 * best[3] / best[1] : 0.0,
               options.repeat > 1 ? " (fastest of the alternating solves)" : "");
        printf("  checksum %.12e, results %s\n", total,
               all_equal ? "bitwise equal" : "DIFFERENT (FAILED)");
    }
    free(reference.u);
    free(reference.next);
    free(field.u);
    free(field.next);
    PMR_CHECK(pmr_communicator_destroy(&cart));
    MPI_Finalize();
    return all_equal ? 0 : 1;
}
