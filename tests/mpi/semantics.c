/* SPDX-License-Identifier: MIT */
/* An ordinary MPI program that checks MPI's matching rules where pmr-mpi carries streams: every
 * case first repeats a stream so that it is carried (under pmr-run), then mixes in what a
 * carried stream must still get right. Run plain and under pmr-run; both must pass. Ranks pair
 * up (0-1, 2-3, ...); an odd last rank only joins the collectives. */
#include <mpi.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int errors = 0;

#define EXPECT(cond, ...)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "rank %d, line %d: ", rank, __LINE__);                                 \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
            ++errors;                                                                              \
        }                                                                                          \
    } while (0)

static int rank, size;

/* Messages the interposer carried on pmr so far (0 without it). */
static unsigned long long carried(void) {
    unsigned long long (*f)(void) =
        (unsigned long long (*)(void))dlsym(RTLD_DEFAULT, "pmr_mpi_carried_messages");
    int (*on)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "pmr_mpi_enabled");
    return f && on && on() ? f() : 0;
}
static int interposed(void) {
    int (*on)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "pmr_mpi_enabled");
    return on && on();
}

/* A communicator of its own for each case: a wildcard or probe in one case does not keep the
 * streams of the next from being carried. */
static MPI_Comm fresh(void) {
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
    return c;
}

/* Repeats a stream (peer, tag) of n ints with plain calls, checking each message; the receiver
 * acknowledges each one, so that the sender cannot run ahead and the stream is carried (under
 * pmr-run) before the case that follows. */
static void warm(MPI_Comm comm, int peer, int tag, int n, int sender) {
    int* buf = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
    int ack = 0;
    for (int it = 0; it < 6; ++it) {
        if (sender && it > 0) {
            MPI_Recv(&ack, 1, MPI_INT, peer, 99, comm, MPI_STATUS_IGNORE);
        } else if (!sender && it > 0) {
            MPI_Send(&ack, 1, MPI_INT, peer, 99, comm);
        }
        if (sender) {
            for (int i = 0; i < n; ++i) {
                buf[i] = tag * 1000 + it * 10 + i;
            }
            MPI_Send(buf, n, MPI_INT, peer, tag, comm);
        } else {
            MPI_Status st;
            MPI_Recv(buf, n, MPI_INT, peer, tag, comm, &st);
            for (int i = 0; i < n; ++i) {
                EXPECT(buf[i] == tag * 1000 + it * 10 + i, "warm tag %d it %d [%d] = %d", tag, it,
                       i, buf[i]);
            }
        }
    }
    free(buf);
}

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    /* Made by every rank (MPI_Comm_dup is collective), used by the pairs. */
    MPI_Comm cases[16];
    int ncases = 0;
    for (int i = 0; i < 16; ++i) {
        cases[i] = fresh();
    }
    MPI_Comm pairs; /* the two ranks of a pair (a lone last rank alone) */
    MPI_Comm_split(MPI_COMM_WORLD, rank / 2, rank, &pairs);
    MPI_Comm base = fresh();
    MPI_Comm comm = base;
    unsigned long long before = carried();
    const int partner = (rank ^ 1) < size ? (rank ^ 1) : MPI_PROC_NULL;
    const int sender = rank % 2 == 0;

    if (partner != MPI_PROC_NULL) {
        /* 1. Order within a stream across plain, persistent and blocking calls. */
        comm = cases[ncases++];
        before = carried();
        warm(comm, partner, 1, 4, sender);
        if (sender) {
            int a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8};
            MPI_Request r[2];
            MPI_Send_init(a, 4, MPI_INT, partner, 1, comm, &r[0]);
            MPI_Isend(b, 4, MPI_INT, partner, 1, comm, &r[1]);
            MPI_Start(&r[0]); /* started after the Isend: arrives second */
            MPI_Waitall(2, r, MPI_STATUSES_IGNORE);
            MPI_Request_free(&r[0]);
        } else {
            int x[4], y[4];
            MPI_Recv(x, 4, MPI_INT, partner, 1, comm, MPI_STATUS_IGNORE);
            MPI_Recv(y, 4, MPI_INT, partner, 1, comm, MPI_STATUS_IGNORE);
            EXPECT(x[0] == 5 && x[3] == 8 && y[0] == 1 && y[3] == 4,
                   "order: got %d..%d then %d..%d", x[0], x[3], y[0], y[3]);
        }

        /* 2. Truncation: a message longer than the receive buffer is MPI_ERR_TRUNCATE and
         * nothing beyond the buffer is written. */
        if (interposed()) {
            EXPECT(carried() > before, "the previous case's stream was not carried");
        }
        comm = cases[ncases++];
        before = carried();
        warm(comm, partner, 2, 8, sender);
        if (sender) {
            int big[8] = {1, 2, 3, 4, 5, 6, 7, 8};
            MPI_Send(big, 8, MPI_INT, partner, 2, comm);
        } else {
            int small[6] = {0, 0, 0, 0, -7, -7};
            MPI_Status st;
            int rc = MPI_Recv(small, 4, MPI_INT, partner, 2, comm, &st);
            int cls = 0;
            MPI_Error_class(rc, &cls);
            EXPECT(cls == MPI_ERR_TRUNCATE, "truncation returned class %d", cls);
            /* What lands inside the buffer is the implementation's choice (MPICH writes none). */
            EXPECT(small[4] == -7 && small[5] == -7, "written past the buffer: %d %d", small[4],
                   small[5]);
        }

        /* 3. Wildcards after the stream is carried: MPI_ANY_TAG and MPI_ANY_SOURCE receive the
         * carried stream's messages in order, with the right status. */
        if (interposed()) {
            EXPECT(carried() > before, "the previous case's stream was not carried");
        }
        comm = cases[ncases++];
        before = carried();
        warm(comm, partner, 3, 2, sender);
        if (sender) {
            int m[2] = {31, 32};
            MPI_Send(m, 2, MPI_INT, partner, 3, comm);
            m[0] = 33;
            MPI_Send(m, 2, MPI_INT, partner, 3, comm);
        } else {
            int m[2];
            MPI_Status st;
            MPI_Recv(m, 2, MPI_INT, MPI_ANY_SOURCE, 3, comm, &st);
            EXPECT(m[0] == 31 && st.MPI_SOURCE == partner && st.MPI_TAG == 3,
                   "any source: %d from %d tag %d", m[0], st.MPI_SOURCE, st.MPI_TAG);
            MPI_Recv(m, 2, MPI_INT, partner, MPI_ANY_TAG, comm, &st);
            int count = 0;
            MPI_Get_count(&st, MPI_INT, &count);
            EXPECT(m[0] == 33 && st.MPI_TAG == 3 && count == 2, "any tag: %d tag %d count %d", m[0],
                   st.MPI_TAG, count);
        }

        /* 4. Probe of a carried stream gives the next message's size; the receive then gets it. */
        if (interposed()) {
            EXPECT(carried() > before, "the previous case's stream was not carried");
        }
        comm = cases[ncases++];
        before = carried();
        warm(comm, partner, 4, 3, sender);
        if (sender) {
            int m[5] = {41, 42, 43, 44, 45};
            MPI_Send(m, 5, MPI_INT, partner, 4, comm);
        } else {
            MPI_Status st;
            MPI_Probe(partner, 4, comm, &st);
            int count = 0;
            MPI_Get_count(&st, MPI_INT, &count);
            EXPECT(count == 5 && st.MPI_SOURCE == partner, "probe count %d", count);
            int m[5] = {0};
            MPI_Recv(m, count, MPI_INT, partner, 4, comm, MPI_STATUS_IGNORE);
            EXPECT(m[0] == 41 && m[4] == 45, "after probe: %d..%d", m[0], m[4]);
        }

        /* 5. A vector datatype (a strided halo face) on a carried stream. */
        comm = cases[ncases++];
        before = carried();
        warm(comm, partner, 5, 4, sender);
        {
            MPI_Datatype column;
            MPI_Type_vector(4, 1, 4, MPI_DOUBLE, &column);
            MPI_Type_commit(&column);
            for (int it = 0; it < 6; ++it) {
                double grid[16];
                if (sender) {
                    for (int i = 0; i < 16; ++i) {
                        grid[i] = it * 100 + i;
                    }
                    MPI_Send(&grid[1], 1, column, partner, 5, comm);
                } else {
                    for (int i = 0; i < 16; ++i) {
                        grid[i] = -1;
                    }
                    MPI_Recv(&grid[2], 1, column, partner, 5, comm, MPI_STATUS_IGNORE);
                    for (int i = 0; i < 16; ++i) {
                        double expect = i % 4 == 2 ? it * 100 + (i - 1) : -1;
                        EXPECT(grid[i] == expect, "vector it %d [%d] = %g, expected %g", it, i,
                               grid[i], expect);
                    }
                }
            }
            MPI_Type_free(&column);
        }

        /* 6. Cancel a carried receive that has no message; free a persistent receive while it is
         * active: its message still lands. */
        if (interposed()) {
            EXPECT(carried() > before, "the previous case's stream was not carried");
        }
        comm = cases[ncases++];
        before = carried();
        warm(comm, partner, 6, 1, sender);
        if (!sender) {
            int m = 0;
            MPI_Request r;
            MPI_Irecv(&m, 1, MPI_INT, partner, 6, comm, &r);
            MPI_Cancel(&r);
            MPI_Status st;
            MPI_Wait(&r, &st);
            int cancelled = 0;
            MPI_Test_cancelled(&st, &cancelled);
            EXPECT(cancelled == 1, "cancel of an unmatched receive did not cancel");
        }
        {
            /* The receiver has cancelled before the sender sends. */
            int token = 0;
            MPI_Sendrecv(&token, 1, MPI_INT, partner, 11, &token, 1, MPI_INT, partner, 11, comm,
                         MPI_STATUS_IGNORE);
        }
        if (sender) {
            int m = 66;
            MPI_Send(&m, 1, MPI_INT, partner, 6, comm);
        } else {
            int m = 0;
            MPI_Recv(&m, 1, MPI_INT, partner, 6, comm, MPI_STATUS_IGNORE);
            EXPECT(m == 66, "after cancel: %d", m);
        }

        /* 7. Large messages on a stream carried at small sizes (chunked), and zero-byte ones. */
        if (interposed()) {
            EXPECT(carried() > before, "the previous case's stream was not carried");
        }
        comm = cases[ncases++];
        before = carried();
        warm(comm, partner, 7, 16, sender);
        {
            int n = 100000;
            int* big = malloc(sizeof(int) * (size_t)n);
            if (sender) {
                for (int i = 0; i < n; ++i) {
                    big[i] = i ^ 0x5a5a;
                }
                MPI_Send(big, n, MPI_INT, partner, 7, comm);
                MPI_Send(big, 0, MPI_INT, partner, 7, comm);
            } else {
                MPI_Status st;
                MPI_Recv(big, n, MPI_INT, partner, 7, comm, &st);
                int bad = 0;
                for (int i = 0; i < n; ++i) {
                    bad += big[i] != (i ^ 0x5a5a);
                }
                EXPECT(bad == 0, "chunked message: %d wrong elements", bad);
                MPI_Recv(big, n, MPI_INT, partner, 7, comm, &st);
                int count = -1;
                MPI_Get_count(&st, MPI_INT, &count);
                EXPECT(count == 0, "zero-byte message count %d", count);
            }
            free(big);
        }

        /* 8. Eager behaviour: two small blocking sends before the receiver posts anything. */
        if (interposed()) {
            EXPECT(carried() > before, "the previous case's stream was not carried");
        }
        comm = cases[ncases++];
        before = carried();
        warm(comm, partner, 8, 1, sender);
        {
            int m[2] = {81, 82};
            if (sender) {
                MPI_Send(&m[0], 1, MPI_INT, partner, 8, comm);
                MPI_Send(&m[1], 1, MPI_INT, partner, 8, comm);
                MPI_Recv(&m[0], 1, MPI_INT, partner, 9, comm, MPI_STATUS_IGNORE);
            } else {
                MPI_Send(&m[0], 1, MPI_INT, partner, 9, comm);
                int a = 0, b = 0;
                MPI_Recv(&a, 1, MPI_INT, partner, 8, comm, MPI_STATUS_IGNORE);
                MPI_Recv(&b, 1, MPI_INT, partner, 8, comm, MPI_STATUS_IGNORE);
                EXPECT(a == 81 && b == 82, "eager pair %d %d", a, b);
            }
        }
    }

    /* 8b. Both ranks send six messages on their carried stream before either receives: MPI
     * buffers them (eager), so must a carried stream, whatever its number of slots. */
    if (partner != MPI_PROC_NULL) {
        if (interposed()) {
            EXPECT(carried() > before, "the previous case's stream was not carried");
        }
        comm = cases[ncases++];
        warm(comm, partner, 12, 1, sender);
        warm(comm, partner, 12, 1, !sender);
        before = carried();
        int out[6], in[6];
        for (int i = 0; i < 6; ++i) {
            out[i] = 120 + i + 10 * rank;
            MPI_Send(&out[i], 1, MPI_INT, partner, 12, comm);
        }
        for (int i = 0; i < 6; ++i) {
            MPI_Recv(&in[i], 1, MPI_INT, partner, 12, comm, MPI_STATUS_IGNORE);
            EXPECT(in[i] == 120 + i + 10 * partner, "run-ahead %d: %d", i, in[i]);
        }
    }

    /* 8c. A derived datatype freed while a receive with it waits on a carried stream (MPI
     * allows it); then a wildcard receive that no carried stream could match, left pending while
     * the rank sits in a collective the interposer does not wrap, must still take a
     * rendezvous-size message sent meanwhile (MPI progresses it there). */
    if (partner != MPI_PROC_NULL) {
        if (interposed()) {
            EXPECT(carried() > before, "the previous case's stream was not carried");
        }
        comm = cases[ncases++];
        warm(comm, partner, 13, 2, sender);
        before = carried();
        MPI_Datatype pair;
        MPI_Type_vector(2, 1, 2, MPI_INT, &pair);
        MPI_Type_commit(&pair);
        int v[4] = {-1, -1, -1, -1};
        if (sender) {
            int m[2] = {131, 132};
            MPI_Send(m, 2, MPI_INT, partner, 13, comm);
        } else {
            MPI_Request r;
            MPI_Irecv(v, 1, pair, partner, 13, comm, &r);
            MPI_Type_free(&pair);
            MPI_Wait(&r, MPI_STATUS_IGNORE);
            EXPECT(v[0] == 131 && v[1] == -1 && v[2] == 132, "freed type: %d %d %d", v[0], v[1],
                   v[2]);
        }
        if (sender) {
            MPI_Type_free(&pair);
        }
        const int n = 100000;
        int* big = calloc((size_t)n, sizeof(int));
        MPI_Request r = MPI_REQUEST_NULL;
        if (sender) {
            big[0] = 42;
            MPI_Send(big, n, MPI_INT, partner, 14, comm);
        } else {
            MPI_Irecv(big, n, MPI_INT, MPI_ANY_SOURCE, 14, comm, &r);
        }
        int token[2];
        MPI_Allgather(&rank, 1, MPI_INT, token, 1, MPI_INT, pairs);
        if (!sender) {
            MPI_Wait(&r, MPI_STATUS_IGNORE);
            EXPECT(big[0] == 42, "wildcard beside a carried stream: %d", big[0]);
        }
        free(big);
    }

    /* 8d. A synchronous send on a carried stream completes only once the receive has started
     * (the receiver posts it only after the sender has seen the send incomplete many times);
     * the stream's later messages still arrive in order. */
    if (partner != MPI_PROC_NULL) {
        if (interposed()) {
            EXPECT(carried() > before, "the previous case's stream was not carried");
        }
        comm = cases[ncases++];
        before = carried();
        warm(comm, partner, 15, 1, sender);
        if (interposed()) {
            EXPECT(carried() > before, "the synchronous case's stream was not carried");
        }
        int m[2] = {151, 152};
        if (sender) {
            MPI_Request r;
            MPI_Issend(&m[0], 1, MPI_INT, partner, 15, comm, &r);
            int early = 0;
            for (int i = 0; i < 200 && !early; ++i) {
                MPI_Test(&r, &early, MPI_STATUS_IGNORE);
            }
            EXPECT(!early, "MPI_Issend completed before its receive was posted");
            int go = 1;
            MPI_Send(&go, 1, MPI_INT, partner, 16, comm);
            if (!early) {
                MPI_Wait(&r, MPI_STATUS_IGNORE);
            }
            MPI_Send(&m[1], 1, MPI_INT, partner, 15, comm);
        } else {
            int go = 0, x = -1, y = -1;
            MPI_Recv(&go, 1, MPI_INT, partner, 16, comm, MPI_STATUS_IGNORE);
            MPI_Recv(&x, 1, MPI_INT, partner, 15, comm, MPI_STATUS_IGNORE);
            MPI_Recv(&y, 1, MPI_INT, partner, 15, comm, MPI_STATUS_IGNORE);
            EXPECT(x == 151 && y == 152, "synchronous send: %d then %d", x, y);
        }
    }

    /* 8e. Matched probes on a carried stream (MPI_Mprobe, MPI_Improbe with MPI_ANY_TAG) take its
     * messages in order, with their size; MPI_Mrecv and MPI_Imrecv deliver them, a later plain
     * receive gets the next one. */
    if (partner != MPI_PROC_NULL) {
        comm = cases[ncases++];
        before = carried();
        warm(comm, partner, 17, 3, sender);
        if (interposed()) {
            EXPECT(carried() > before, "the matched-probe case's stream was not carried");
        }
        if (sender) {
            for (int i = 0; i < 3; ++i) {
                int m[3] = {170 + i, 171 + i, 172 + i};
                MPI_Send(m, 3 - i, MPI_INT, partner, 17, comm);
            }
        } else {
            int m[3] = {-1, -1, -1}, n = -1;
            MPI_Message msg;
            MPI_Status st;
            MPI_Mprobe(partner, 17, comm, &msg, &st);
            MPI_Get_count(&st, MPI_INT, &n);
            EXPECT(n == 3 && st.MPI_TAG == 17, "mprobe: %d ints, tag %d", n, st.MPI_TAG);
            MPI_Mrecv(m, 3, MPI_INT, &msg, &st);
            EXPECT(m[0] == 170 && m[2] == 172 && msg == MPI_MESSAGE_NULL, "mrecv: %d %d", m[0],
                   m[2]);
            int flag = 0;
            while (!flag) {
                MPI_Improbe(partner, MPI_ANY_TAG, comm, &flag, &msg, &st);
            }
            MPI_Get_count(&st, MPI_INT, &n);
            EXPECT(n == 2 && st.MPI_SOURCE == partner, "improbe: %d ints from %d", n,
                   st.MPI_SOURCE);
            MPI_Request r;
            MPI_Imrecv(m, 3, MPI_INT, &msg, &r);
            MPI_Wait(&r, &st);
            MPI_Get_count(&st, MPI_INT, &n);
            EXPECT(n == 2 && m[0] == 171 && m[1] == 172, "imrecv: %d ints, %d %d", n, m[0], m[1]);
            MPI_Recv(m, 3, MPI_INT, partner, 17, comm, &st);
            EXPECT(m[0] == 172, "after the probes: %d", m[0]);
        }
    }

    /* 8f. MPI_Waitany, MPI_Waitsome, MPI_Testsome and MPI_Testany over carried receives mixed
     * with MPI_REQUEST_NULL and an inactive persistent request: indices, order and values as
     * MPI gives them, and "no active request" reported as MPI does. */
    if (partner != MPI_PROC_NULL) {
        comm = cases[ncases++];
        before = carried();
        warm(comm, partner, 18, 1, sender);
        if (interposed()) {
            EXPECT(carried() > before, "the Waitany case's stream was not carried");
        }
        int ack = 0;
        if (sender) {
            for (int i = 0; i < 4; ++i) {
                int m = 180 + i;
                MPI_Send(&m, 1, MPI_INT, partner, 18, comm);
            }
            MPI_Recv(&ack, 1, MPI_INT, partner, 19, comm, MPI_STATUS_IGNORE);
        } else {
            int a[3] = {-1, -1, -1}, idle = 0, index = -1, count = 0, indices[3];
            MPI_Request r[3];
            MPI_Status st[3];
            MPI_Irecv(&a[0], 1, MPI_INT, partner, 18, comm, &r[0]);
            r[1] = MPI_REQUEST_NULL;
            MPI_Recv_init(&idle, 1, MPI_INT, partner, 20, comm, &r[2]); /* never started */
            MPI_Waitany(3, r, &index, &st[0]);
            EXPECT(index == 0 && a[0] == 180 && r[0] == MPI_REQUEST_NULL && st[0].MPI_TAG == 18,
                   "waitany: index %d value %d", index, a[0]);
            MPI_Irecv(&a[0], 1, MPI_INT, partner, 18, comm, &r[0]);
            MPI_Irecv(&a[1], 1, MPI_INT, partner, 18, comm, &r[1]);
            int done = 0, rounds = 0;
            while (done < 2) {
                if (rounds++ % 2 == 0) {
                    MPI_Waitsome(3, r, &count, indices, st);
                } else {
                    MPI_Testsome(3, r, &count, indices, st);
                }
                EXPECT(count != MPI_UNDEFINED, "waitsome: no active request");
                for (int k = 0; k < count && count != MPI_UNDEFINED; ++k) {
                    EXPECT(indices[k] == 0 || indices[k] == 1, "waitsome: index %d", indices[k]);
                    EXPECT(st[k].MPI_SOURCE == partner, "waitsome: source %d", st[k].MPI_SOURCE);
                }
                done += count == MPI_UNDEFINED ? 2 : count;
            }
            EXPECT(a[0] == 181 && a[1] == 182, "waitsome order: %d %d", a[0], a[1]);
            MPI_Irecv(&a[2], 1, MPI_INT, partner, 18, comm, &r[1]);
            int flag = 0;
            while (!flag) {
                MPI_Testany(3, r, &index, &flag, &st[0]);
            }
            EXPECT(index == 1 && a[2] == 183, "testany: index %d value %d", index, a[2]);
            MPI_Testany(3, r, &index, &flag, &st[0]);
            EXPECT(flag && index == MPI_UNDEFINED, "testany without active requests: %d %d", flag,
                   index);
            MPI_Request_free(&r[2]);
            MPI_Send(&ack, 1, MPI_INT, partner, 19, comm);
        }
    }

    /* 8g. A new tag for every message (5000 of them, more than the interposer follows on one
     * communicator), then a stream that repeats: every message arrives, in order. */
    if (partner != MPI_PROC_NULL) {
        MPI_Comm many = cases[ncases++];
        for (int t = 0; t < 5000; ++t) {
            int out = t * 7 + rank, in = -1;
            MPI_Sendrecv(&out, 1, MPI_INT, partner, 1000 + t, &in, 1, MPI_INT, partner, 1000 + t,
                         many, MPI_STATUS_IGNORE);
            if (in != t * 7 + partner) {
                EXPECT(0, "tag %d: %d", 1000 + t, in);
                break;
            }
        }
        warm(many, partner, 21, 2, sender);
    }

    /* Under pmr-run every case above ran on a carried stream. */
    if (partner != MPI_PROC_NULL && interposed()) {
        EXPECT(carried() > before, "the last case's stream was not carried");
    }
    for (int i = 0; i < 16; ++i) {
        MPI_Comm_free(&cases[i]); /* with carried streams */
    }
    comm = base;
    MPI_Comm_free(&pairs);

    /* 9. MPI_PROC_NULL and self messages. */
    {
        int m = 5;
        MPI_Status st;
        MPI_Sendrecv(&m, 1, MPI_INT, MPI_PROC_NULL, 0, &m, 1, MPI_INT, MPI_PROC_NULL, 0, comm, &st);
        EXPECT(st.MPI_SOURCE == MPI_PROC_NULL && m == 5, "proc null: source %d", st.MPI_SOURCE);
        for (int it = 0; it < 5; ++it) {
            int out = it, in = -1;
            MPI_Sendrecv(&out, 1, MPI_INT, rank, 10, &in, 1, MPI_INT, rank, 10, comm, &st);
            EXPECT(in == it, "self: %d", in);
        }
    }

    /* 10. Collectives with built-in and non-built-in operations, repeated. */
    for (int it = 0; it < 6; ++it) {
        double d[3] = {rank + it, -rank, rank * 0.25};
        double r[3];
        MPI_Allreduce(d, r, 3, MPI_DOUBLE, MPI_MAX, comm);
        EXPECT(r[0] == size - 1 + it && r[1] == 0 && r[2] == (size - 1) * 0.25, "max %g %g %g",
               r[0], r[1], r[2]);
        long long l = rank + 1, lp = 0;
        MPI_Allreduce(&l, &lp, 1, MPI_LONG_LONG, MPI_PROD, comm);
        long long expect = 1;
        for (int k = 1; k <= size; ++k) {
            expect *= k;
        }
        EXPECT(lp == expect, "prod %lld", lp);
        /* Non-blocking global sums, two in flight at once, with point-to-point in between. */
        double in1 = rank + it, out1 = 0, in2 = 2.0 * rank, out2 = 0;
        MPI_Request rr[2];
        MPI_Iallreduce(&in1, &out1, 1, MPI_DOUBLE, MPI_SUM, comm, &rr[0]);
        MPI_Iallreduce(&in2, &out2, 1, MPI_DOUBLE, MPI_SUM, comm, &rr[1]);
        MPI_Waitall(2, rr, MPI_STATUSES_IGNORE);
        EXPECT(out1 == size * (size - 1) / 2.0 + size * it && out2 == size * (size - 1.0),
               "iallreduce %g %g", out1, out2);
        int b[2] = {rank == 0 ? 100 + it : -1, rank == 0 ? 7 : -1};
        MPI_Bcast(b, 2, MPI_INT, 0, comm);
        EXPECT(b[0] == 100 + it && b[1] == 7, "bcast %d %d", b[0], b[1]);
    }

    /* 11. Global sums of 300 different lengths, three times each (more signatures than the
     * interposer follows on one communicator): every result right. */
    {
        double v[300], r[300];
        for (int rep = 0; rep < 3; ++rep) {
            for (int n = 1; n <= 300; ++n) {
                for (int i = 0; i < n; ++i) {
                    v[i] = rank + i;
                }
                MPI_Allreduce(v, r, n, MPI_DOUBLE, MPI_SUM, comm);
                if (r[n - 1] != size * (size - 1) / 2.0 + (double)size * (n - 1)) {
                    EXPECT(0, "sum of %d: %g", n, r[n - 1]);
                    break;
                }
            }
        }
    }

    int all = 0;
    MPI_Allreduce(&errors, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("semantics: %d ranks, %d errors\n", size, all);
    }
    MPI_Comm_free(&comm);
    MPI_Finalize();
    return all == 0 ? 0 : 1;
}
