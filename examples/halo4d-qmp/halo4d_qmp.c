/* SPDX-License-Identifier: MIT */
/* halo4d-qmp: the halo exchange of a 4D Wilson-Dslash-style stencil, written against qmp.h as a
 * lattice-QCD code writes it, running on pmr through libqmp.
 *
 * Each node holds its part of a periodic 4D lattice of spinors (24 reals per site, x fastest).
 * The 8 faces are sent straight out of the field through strided message memory (QMP packs them),
 * into contiguous ghost zones from QMP_allocate_memory; all 16 handles form one multiple handle
 * that every iteration starts and waits. Then the hopping term of the Dslash, without gauge links
 * and gamma matrices,  chi(x) = sum_mu [psi(x + mu) + psi(x - mu)],  is computed from the field
 * and the ghosts and checked exactly against the value of the global field, and its norm is
 * summed with QMP_sum_double.
 *
 *   mpirun -np 4 halo4d-qmp [--lattice X Y Z T] [--iterations N] [-qmp-geom a b c d]
 *
 * QMP_layout_grid spreads the nodes over the lattice (or takes -qmp-geom). Exits non-zero if a
 * value is wrong. */
#include <qmp.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ND 4
#define SPINOR 24 /* reals per site: 4 spins x 3 colours x complex */

typedef struct {
    int local[ND];   /* local extent per axis */
    int global[ND];  /* global extent */
    int offset[ND];  /* global coordinate of the local origin */
    long volume;     /* local sites */
    long stride[ND]; /* sites between neighbours along each axis */
} Geometry;

/* The field's exact value at global site g: small integers, so sums are exact. */
static double field(const int g[ND], int component, int iteration) {
    return (double)((g[0] + 3 * g[1] + 5 * g[2] + 7 * g[3] + 11 * component + 13 * iteration) % 97);
}

static void site_coordinates(const Geometry* geo, long site, int x[ND]) {
    for (int mu = 0; mu < ND; ++mu) {
        x[mu] = (int)(site % geo->local[mu]);
        site /= geo->local[mu];
    }
}

static long site_index(const Geometry* geo, const int x[ND]) {
    long site = 0;
    for (int mu = ND - 1; mu >= 0; --mu) {
        site = site * geo->local[mu] + x[mu];
    }
    return site;
}

/* Position of face site x (x[mu] fixed) in the ghost zone of axis mu: the face's own order. */
static long face_index(const Geometry* geo, const int x[ND], int mu) {
    long position = 0;
    for (int nu = ND - 1; nu >= 0; --nu) {
        if (nu != mu) {
            position = position * geo->local[nu] + x[nu];
        }
    }
    return position;
}

typedef struct {
    double* ghost[2 * ND]; /* face 2 mu + side: side 0 from below (x - mu), 1 from above */
    QMP_mem_t* ghost_mem[2 * ND];
    QMP_msgmem_t mem[4 * ND];
    QMP_msghandle_t all;
} Halo;

/* The face of the field at x[mu] == layer as QMP strided memory: blocks of the sites below axis
 * mu (contiguous), one block every stride[mu + 1] sites. */
static QMP_msgmem_t face_memory(const Geometry* geo, double* psi, int mu, int layer) {
    const size_t block = (size_t)geo->stride[mu] * SPINOR * sizeof(double);
    const long blocks = geo->volume / (geo->stride[mu] * geo->local[mu]);
    const ptrdiff_t stride =
        (ptrdiff_t)(geo->stride[mu] * geo->local[mu]) * SPINOR * (ptrdiff_t)sizeof(double);
    return QMP_declare_strided_msgmem(psi + geo->stride[mu] * layer * SPINOR, block, (int)blocks,
                                      stride);
}

static int setup_halo(const Geometry* geo, double* psi, Halo* halo) {
    QMP_msghandle_t h[4 * ND];
    for (int mu = 0; mu < ND; ++mu) {
        const size_t face_bytes = (size_t)(geo->volume / geo->local[mu]) * SPINOR * sizeof(double);
        for (int side = 0; side < 2; ++side) {
            const int f = 2 * mu + side;
            const int dir = side == 0 ? -1 : +1;
            halo->ghost_mem[f] = QMP_allocate_memory(face_bytes);
            if (halo->ghost_mem[f] == NULL) {
                return 0;
            }
            halo->ghost[f] = QMP_get_memory_pointer(halo->ghost_mem[f]);
            /* Our lowest layer goes down (it is the ghost "from above" of the node below), our
             * highest layer goes up. */
            halo->mem[2 * f] = face_memory(geo, psi, mu, side == 0 ? 0 : geo->local[mu] - 1);
            halo->mem[2 * f + 1] = QMP_declare_msgmem(halo->ghost[f], face_bytes);
            h[2 * f] = QMP_declare_send_relative(halo->mem[2 * f], mu, dir, 0);
            h[2 * f + 1] = QMP_declare_receive_relative(halo->mem[2 * f + 1], mu, dir, 0);
            if (h[2 * f] == NULL || h[2 * f + 1] == NULL) {
                return 0;
            }
        }
    }
    halo->all = QMP_declare_multiple(h, 4 * ND);
    return halo->all != NULL;
}

static void free_halo(Halo* halo) {
    QMP_free_msghandle(halo->all);
    for (int i = 0; i < 4 * ND; ++i) {
        QMP_free_msgmem(halo->mem[i]);
    }
    for (int f = 0; f < 2 * ND; ++f) {
        QMP_free_memory(halo->ghost_mem[f]);
    }
}

/* psi at local site x shifted by dir along mu: from the field or from a ghost zone. */
static const double* neighbour(const Geometry* geo, const double* psi, const Halo* halo,
                               const int x[ND], int mu, int dir) {
    int y[ND];
    memcpy(y, x, sizeof y);
    y[mu] += dir;
    if (y[mu] < 0 || y[mu] >= geo->local[mu]) {
        return halo->ghost[2 * mu + (dir > 0 ? 1 : 0)] + face_index(geo, x, mu) * SPINOR;
    }
    return psi + site_index(geo, y) * SPINOR;
}

int main(int argc, char** argv) {
    QMP_thread_level_t provided;
    if (QMP_init_msg_passing(&argc, &argv, QMP_THREAD_SINGLE, &provided) != QMP_SUCCESS) {
        fprintf(stderr, "halo4d-qmp: %s\n", QMP_get_error_string(NULL));
        return 1;
    }
    Geometry geo;
    int lattice[ND] = {8, 8, 8, 16};
    int iterations = 20;
    for (int i = 1; i < argc; ++i) {
        if (strcmp(argv[i], "--lattice") == 0 && i + ND < argc) {
            for (int mu = 0; mu < ND; ++mu) {
                lattice[mu] = atoi(argv[++i]);
            }
        } else if (strcmp(argv[i], "--iterations") == 0 && i + 1 < argc) {
            iterations = atoi(argv[++i]);
        } else {
            if (QMP_is_primary_node()) {
                fprintf(stderr, "usage: halo4d-qmp [--lattice X Y Z T] [--iterations N] "
                                "[-qmp-geom a b c d]\n");
            }
            QMP_finalize_msg_passing();
            return 2;
        }
    }
    if (QMP_layout_grid(lattice, ND) != QMP_SUCCESS) {
        QMP_error("halo4d-qmp: %s\n", QMP_get_error_string(NULL));
        QMP_finalize_msg_passing();
        return 2;
    }
    const int* sub = QMP_get_subgrid_dimensions();
    const int* coords = QMP_get_logical_coordinates();
    const int* grid = QMP_get_logical_dimensions();
    geo.volume = QMP_get_number_of_subgrid_sites();
    long stride = 1;
    for (int mu = 0; mu < ND; ++mu) {
        geo.local[mu] = sub[mu];
        geo.global[mu] = lattice[mu];
        geo.offset[mu] = coords[mu] * sub[mu];
        geo.stride[mu] = stride;
        stride *= sub[mu];
    }

    double* psi = malloc((size_t)geo.volume * SPINOR * sizeof(double));
    Halo halo;
    if (psi == NULL || !setup_halo(&geo, psi, &halo)) {
        QMP_error("halo4d-qmp: set-up failed: %s\n", QMP_get_error_string(NULL));
        QMP_abort(1);
    }

    long wrong = 0;
    double norm = 0.0;
    double exchange_time = 0.0;
    for (int it = 0; it < iterations; ++it) {
        for (long s = 0; s < geo.volume; ++s) {
            int x[ND];
            int g[ND];
            site_coordinates(&geo, s, x);
            for (int mu = 0; mu < ND; ++mu) {
                g[mu] = geo.offset[mu] + x[mu];
            }
            for (int c = 0; c < SPINOR; ++c) {
                psi[s * SPINOR + c] = field(g, c, it);
            }
        }
        const double t0 = QMP_time();
        QMP_status_t rc = QMP_start(halo.all);
        if (rc == QMP_SUCCESS) {
            rc = QMP_wait(halo.all);
        }
        exchange_time += QMP_time() - t0;
        if (rc != QMP_SUCCESS) {
            QMP_error("halo4d-qmp: %s\n", QMP_get_error_string(halo.all));
            QMP_abort(1);
        }
        /* The hopping term, checked against the global field. */
        norm = 0.0;
        for (long s = 0; s < geo.volume; ++s) {
            int x[ND];
            site_coordinates(&geo, s, x);
            for (int c = 0; c < SPINOR; ++c) {
                double chi = 0.0;
                double expected = 0.0;
                for (int mu = 0; mu < ND; ++mu) {
                    for (int dir = -1; dir <= 1; dir += 2) {
                        chi += neighbour(&geo, psi, &halo, x, mu, dir)[c];
                        int g[ND];
                        for (int nu = 0; nu < ND; ++nu) {
                            g[nu] = geo.offset[nu] + x[nu] + (nu == mu ? dir : 0);
                            g[nu] = (g[nu] + geo.global[nu]) % geo.global[nu];
                        }
                        expected += field(g, c, it);
                    }
                }
                wrong += chi != expected;
                norm += chi * chi;
            }
        }
    }
    QMP_sum_double(&norm);
    double wrong_all = (double)wrong;
    QMP_sum_double(&wrong_all);
    QMP_max_double(&exchange_time);
    if (QMP_is_primary_node()) {
        printf("halo4d-qmp: %d nodes as %d x %d x %d x %d, local lattice %d x %d x %d x %d, "
               "%d iterations\n",
               QMP_get_number_of_nodes(), grid[0], grid[1], grid[2], grid[3], geo.local[0],
               geo.local[1], geo.local[2], geo.local[3], iterations);
        printf("  exchange (8 strided faces)  %.3f us per iteration (slowest node)\n",
               exchange_time / iterations * 1e6);
        printf("  |chi|^2 of the last field   %.1f\n", norm);
        if (wrong_all == 0.0) {
            printf("  verification                every hopping term is exact\n");
        } else {
            printf("  VERIFICATION FAILED: %.0f wrong values\n", wrong_all);
        }
    }
    free_halo(&halo);
    free(psi);
    QMP_finalize_msg_passing();
    return wrong_all == 0.0 ? 0 : 1;
}
