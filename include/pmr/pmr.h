/* SPDX-License-Identifier: MIT */
/**
 * @file pmr.h
 * The C interface of pmr: persistent connections and windows for halo exchange beside MPI.
 * Valid C99 (and later) and C++. Link with libpmr (`pkg-config --cflags --libs pmr`, or
 * `pmr::pmr` in CMake); no C++ compiler is needed to use it.
 *
 * The model is that of the C++ API (README.md, "The model in six rules"):
 *   - Connections pair by tags: (comm, p, a, b) on rank q pairs with (comm, q, b, a) on rank p.
 *   - Windows pair in creation order: the k-th send window of a connection pairs with the k-th
 *     receive window of the partner's connection. A send window may be smaller than its receive
 *     window, never larger (PMR_ERR_SIZE on both sides at the first init).
 *   - One round is init, post, wait on both sides:
 *         pmr_recv_window_init(r);  pmr_send_window_init(s);
 *         pmr_send_window_post(s, bytes);  pmr_recv_window_post(r);
 *         pmr_send_window_wait(s);  pmr_recv_window_wait(r);
 *     Between init and the end of wait the receive buffer belongs to pmr; between post and the end
 *     of wait the send buffer must not be written. Calls out of order give PMR_ERR_USAGE.
 *     post never blocks: it does not wait for the receiver's init.
 *   - Creation never blocks; the first use waits until the peer has created the matching side.
 *
 * Windows of the C interface are byte windows: sizes and counts are in bytes.
 *
 * Errors: every function that returns int returns PMR_SUCCESS (0) or one of the PMR_ERR_* codes
 * below and never aborts, never lets an exception escape. pmr_last_error() gives the message of
 * the calling thread's last failed call ("pmr: <what> [<where>]. <what to do>"). A NULL handle is
 * PMR_ERR_ARGUMENT. A failed create leaves *out == NULL.
 *
 * Threads: a connection and its windows are used by one thread at a time; different connections
 * may be used from different threads. Creation calls MPI and needs MPI_THREAD_SERIALIZED if done
 * from several threads. The data path (init, post, wait, test) never calls MPI.
 */
#ifndef PMR_PMR_H
#define PMR_PMR_H

#include <mpi.h>
#include <stddef.h> /* NOLINT(modernize-deprecated-headers): a C header */

#ifdef __cplusplus
extern "C" {
#endif

/* Return codes: one per exception type of the C++ API. */
#define PMR_SUCCESS 0
#define PMR_ERR_USAGE 1     /**< calls in the wrong order (pmr::UsageError) */
#define PMR_ERR_ARGUMENT 2  /**< bad rank, tag, handle or pointer (pmr::ArgumentError) */
#define PMR_ERR_SIZE 3      /**< a size that does not fit (pmr::SizeError) */
#define PMR_ERR_PROVIDER 4  /**< a native call of a transport failed (pmr::ProviderError) */
#define PMR_ERR_BOOTSTRAP 5 /**< MPI failed during set-up, or is not initialised */
#define PMR_ERR_TIMEOUT 6   /**< a wait exceeded PMR_TIMEOUT or its own timeout (pmr::Timeout) */
#define PMR_ERR_PEER_LOST 7 /**< the peer died or destroyed its window (pmr::PeerLost) */
#define PMR_ERR_NO_MEMORY                                                                          \
    8                   /**< memory or a limit (mappings, descriptors, shared memory) could not    \
                             be had (std::bad_alloc, pmr::ResourceError) */
#define PMR_ERR_OTHER 9 /**< anything else */

/* NOLINTBEGIN(modernize-use-using): a C header */
typedef struct pmr_connection_s* pmr_connection;
typedef struct pmr_send_window_s* pmr_send_window;
typedef struct pmr_recv_window_s* pmr_recv_window;
/** An MPI communicator, optionally with a Cartesian grid (pmr::Communicator). */
typedef struct pmr_communicator_s* pmr_communicator;
/** A persistent global reduction (pmr::Allreduce). */
typedef struct pmr_allreduce_s* pmr_allreduce;
/** A persistent barrier (pmr::Barrier). */
typedef struct pmr_barrier_s* pmr_barrier;
/** A persistent neighbour exchange (pmr::NeighborExchange). */
typedef struct pmr_neighbor_exchange_s* pmr_neighbor_exchange;
/* NOLINTEND(modernize-use-using) */

/** Message of the calling thread's last failed call; "" if none failed yet. Valid until the next
 *  failing call on this thread. Successful calls do not change it. */
const char* pmr_last_error(void);
/** "PMR_ERR_SIZE" for PMR_ERR_SIZE, and so on; "PMR_ERR_UNKNOWN" for a code pmr does not use. */
const char* pmr_error_name(int code);

/* ------------------------------------------------------------------------------------------- */
/* Connections                                                                                   */
/* ------------------------------------------------------------------------------------------- */

/** Connection to rank `peer` of `comm` (MPI_PROC_NULL: a connection whose operations do
 *  nothing). Tags in [0, MPI_TAG_UB / 2]. Never blocks.
 *  @return PMR_ERR_ARGUMENT (bad rank or tag, MPI_COMM_NULL), PMR_ERR_BOOTSTRAP (MPI not
 *  initialised). */
int pmr_connection_create(MPI_Comm comm, int peer, int send_tag, int recv_tag, pmr_connection* out);
/** Destroys the handle and sets *connection = NULL. Windows keep their connection alive, so they
 *  may be destroyed later. Destroying a NULL handle does nothing. */
int pmr_connection_destroy(pmr_connection* connection);
/** Completes the handshake now (otherwise the first use of a window does). Blocks until the peer
 *  has created its side. */
int pmr_connection_establish(pmr_connection c);
/** Writes the name of the transport ("self", "shm", "ucx", ...) into name[0, length), completing
 *  the handshake if needed. PMR_ERR_SIZE if the name (with its terminating 0) does not fit. */
int pmr_connection_provider(pmr_connection c, char* name, size_t length);
/** *established = 1 once the handshake has completed, else 0. Never blocks. */
int pmr_connection_established(pmr_connection c, int* established);
/** The provider if it is chosen already, without blocking (pmr_connection_provider completes the
 *  handshake): its name in name[0, length) and *chosen = 1; else "" and *chosen = 0. It is chosen
 *  at creation for the own rank and for peers whose node is known (communicators of
 *  pmr_communicator_create), else at the handshake. PMR_ERR_SIZE as pmr_connection_provider. */
int pmr_connection_chosen_provider(pmr_connection c, char* name, size_t length, int* chosen);

/* ------------------------------------------------------------------------------------------- */
/* Windows (sizes in bytes)                                                                      */
/* ------------------------------------------------------------------------------------------- */

/** Window over `bytes` bytes at `buffer`, which must stay valid until the window is destroyed.
 *  buffer == NULL: library-owned, zero-filled memory that other processes on the node can map
 *  (the fastest case), reachable through pmr_send_window_data(). */
int pmr_send_window_create(pmr_connection c, void* buffer, size_t bytes, pmr_send_window* out);
int pmr_recv_window_create(pmr_connection c, void* buffer, size_t bytes, pmr_recv_window* out);
/** The window's memory (the user buffer or library-owned memory); NULL for a NULL handle (which
 *  also sets pmr_last_error()). */
void* pmr_send_window_data(pmr_send_window w);
void* pmr_recv_window_data(pmr_recv_window w);
/** Size of the window in bytes. */
int pmr_send_window_size(pmr_send_window w, size_t* bytes);
int pmr_recv_window_size(pmr_recv_window w, size_t* bytes);

/** Sender: starts a round. The first init completes the set-up (PMR_ERR_SIZE if the peer's
 *  receive window is smaller, PMR_ERR_TIMEOUT, PMR_ERR_PEER_LOST). */
int pmr_send_window_init(pmr_send_window w);
/** Transfers the first `bytes` bytes of the window (pass its size for all of it). Never blocks.
 *  PMR_ERR_USAGE before init, PMR_ERR_SIZE if `bytes` exceeds this or the peer's window. */
int pmr_send_window_post(pmr_send_window w, size_t bytes);
/** Waits until the send buffer may be written again. */
int pmr_send_window_wait(pmr_send_window w);
/** pmr_send_window_wait() with its own deadline instead of PMR_TIMEOUT: PMR_ERR_TIMEOUT once
 *  `seconds` have passed without completion (the transfer stays in flight: wait again to keep
 *  waiting); PMR_ERR_ARGUMENT unless seconds > 0. */
int pmr_send_window_wait_timeout(pmr_send_window w, double seconds);
/** Non-blocking wait: *done = 1 once complete (the window is then ready for the next init). */
int pmr_send_window_test(pmr_send_window w, int* done);

/** Receiver: starts a round, granting the sender the right to write the buffer. */
int pmr_recv_window_init(pmr_recv_window w);
/** Marks the transfer as expected. */
int pmr_recv_window_post(pmr_recv_window w);
/** Waits until the data has arrived; the buffer is then the caller's again. */
int pmr_recv_window_wait(pmr_recv_window w);
/** pmr_recv_window_wait() with its own deadline, as pmr_send_window_wait_timeout(). */
int pmr_recv_window_wait_timeout(pmr_recv_window w, double seconds);
int pmr_recv_window_test(pmr_recv_window w, int* done);
/** Bytes delivered by the last completed transfer (PMR_ERR_USAGE before the first). */
int pmr_recv_window_received_bytes(pmr_recv_window w, size_t* bytes);

/** Waits until the posted operations of all the windows have completed (`nsends` send windows
 *  and `nrecvs` receive windows; an array may be NULL when its count is 0), progressing all of
 *  them together with one PMR_TIMEOUT deadline; each is then ready for its next init, as after
 *  its own wait. Every window must be posted (PMR_ERR_USAGE otherwise, before anything waits)
 *  and appear once.
 *  On an error the windows that completed are idle and the others still posted. */
int pmr_wait_all(const pmr_send_window* sends, size_t nsends, const pmr_recv_window* recvs,
                 size_t nrecvs);
/** pmr_wait_all() with its own deadline instead of PMR_TIMEOUT, as
 *  pmr_send_window_wait_timeout(). */
int pmr_wait_all_timeout(const pmr_send_window* sends, size_t nsends, const pmr_recv_window* recvs,
                         size_t nrecvs, double seconds);
/** Non-blocking pmr_wait_all(): *done = 1 once every operation has completed, and then all the
 *  windows are ready for their next init; *done = 0 leaves every window posted. */
int pmr_test_all(const pmr_send_window* sends, size_t nsends, const pmr_recv_window* recvs,
                 size_t nrecvs, int* done);

/** Destroy in any state and set *w = NULL; a peer's pending operation then fails with
 *  PMR_ERR_PEER_LOST instead of hanging. Destroying a NULL handle does nothing. */
int pmr_send_window_destroy(pmr_send_window* w);
int pmr_recv_window_destroy(pmr_recv_window* w);

/* ------------------------------------------------------------------------------------------- */
/* Cartesian grids                                                                               */
/* ------------------------------------------------------------------------------------------- */

/** With ndims > 0: creates a Cartesian grid over `comm` (collective, MPI_Cart_create); entries 0
 *  of `dims` are chosen by MPI_Dims_create, `periods` (may be NULL: none periodic) has ndims
 *  entries, nonzero meaning periodic. The handle owns that communicator and frees it on destroy.
 *  With ndims == 0 (dims and periods ignored): wraps `comm` itself, using its grid if it is
 *  Cartesian; it is never freed by pmr. Ranks keep MPI's order unless `reorder` is nonzero. */
int pmr_communicator_create(MPI_Comm comm, int ndims, const int* dims, const int* periods,
                            int reorder, pmr_communicator* out);
/** Collective if the handle owns a Cartesian communicator (MPI_Comm_free). Sets *c = NULL. */
int pmr_communicator_destroy(pmr_communicator* c);
/** The MPI communicator (the Cartesian one, if created with a grid), e.g. for MPI reference
 *  exchanges. It stays owned by the handle. */
int pmr_communicator_comm(pmr_communicator c, MPI_Comm* comm);
int pmr_communicator_rank(pmr_communicator c, int* rank);
int pmr_communicator_size(pmr_communicator c, int* size);
/** Number of grid dimensions (0 if not Cartesian). */
int pmr_communicator_dimensions(pmr_communicator c, int* ndims);
/** Like MPI_Cart_get: extents, periodicity (0/1) and own coordinates of the first `maxdims`
 *  dimensions; any of the three arrays may be NULL. PMR_ERR_USAGE without a grid. */
int pmr_communicator_grid(pmr_communicator c, int maxdims, int* dims, int* periods, int* coords);
/** Rank of the neighbour in `dimension` (0-based), `direction` -1 or +1; MPI_PROC_NULL at a
 *  non-periodic border. */
int pmr_communicator_neighbor(pmr_communicator c, int dimension, int direction, int* rank);
/** Connection to the neighbour in `dimension`, `direction` -1 or +1, with the tags of
 *  pmr::Communicator::target(): it sends with tag 2*dimension+1 (+1) or 2*dimension (-1) and
 *  receives with the other, each plus `tag_offset`, so a connection to the upper neighbour pairs
 *  with that neighbour's connection to its lower one -- also when both are the same rank or this
 *  rank itself. A non-periodic border gives a null connection. */
int pmr_connection_create_neighbor(pmr_communicator c, int dimension, int direction, int tag_offset,
                                   pmr_connection* out);

/* ------------------------------------------------------------------------------------------- */
/* Collectives (docs/collectives.md)                                                             */
/* ------------------------------------------------------------------------------------------- */

/* Element types of pmr_allreduce_create. */
#define PMR_FLOAT 0
#define PMR_DOUBLE 1
#define PMR_INT32 2          /**< int32_t; sums wrap around */
#define PMR_INT64 3          /**< int64_t; sums wrap around */
#define PMR_COMPLEX_FLOAT 4  /**< float _Complex (sum only) */
#define PMR_COMPLEX_DOUBLE 5 /**< double _Complex (sum only) */
/* Operations. */
#define PMR_SUM 0
#define PMR_MAX 1
#define PMR_MIN 2
/* Algorithms (PMR_ALLREDUCE_AUTOMATIC lets PMR_ALLREDUCE_ALGORITHM or the size decide). */
#define PMR_ALLREDUCE_AUTOMATIC 0
#define PMR_ALLREDUCE_RECURSIVE_DOUBLING 1
#define PMR_ALLREDUCE_RING 2
#define PMR_ALLREDUCE_TRINARYX3                                                                    \
    3                          /**< needs a 3D communicator and >= 3 rails, else PMR_ERR_ARGUMENT */
#define PMR_ALLREDUCE_DIRECT 4 /**< ranks on one node: chunks straight to their owners */
/* Orders: that of the algorithm, or left to right by rank whatever the algorithm. */
#define PMR_ORDER_ALGORITHM 0
#define PMR_ORDER_RANK 1

/** Persistent allreduce of `count` elements over the communicator (collective: every rank creates
 *  the same ones in the same order; arguments that differ between ranks give PMR_ERR_ARGUMENT on
 *  every rank). `in` and `out` both NULL: library-owned buffer, see pmr_allreduce_data(); `in ==
 *  out`: in place over the user buffer; else `in` is read by start and `out` written by the run.
 *  The buffers belong to pmr from start until wait returns (or test sets *done). */
int pmr_allreduce_create(pmr_communicator c, const void* in, void* out, size_t count, int datatype,
                         int op, int algorithm, int order, pmr_allreduce* result);
/** The result buffer (the library-owned one or `out`); NULL for a NULL handle. */
void* pmr_allreduce_data(pmr_allreduce a);
int pmr_allreduce_start(pmr_allreduce a);
int pmr_allreduce_wait(pmr_allreduce a);
int pmr_allreduce_test(pmr_allreduce a, int* done);
/** start + wait. */
int pmr_allreduce_run(pmr_allreduce a);
int pmr_allreduce_destroy(pmr_allreduce* a);

/** Persistent barrier over the communicator (collective). */
int pmr_barrier_create(pmr_communicator c, pmr_barrier* result);
int pmr_barrier_start(pmr_barrier b);
int pmr_barrier_wait(pmr_barrier b);
int pmr_barrier_test(pmr_barrier b, int* done);
/** start + wait. */
int pmr_barrier_run(pmr_barrier b);
int pmr_barrier_destroy(pmr_barrier* b);

/* ------------------------------------------------------------------------------------------- */
/* Neighbour exchange (docs/guide.md, "Neighbour exchange over several rails")                   */
/* ------------------------------------------------------------------------------------------- */

/* Algorithms (PMR_NEIGHBOR_AUTOMATIC lets PMR_NEIGHBOR_ALGORITHM, the crossover or a set-up
 * calibration decide; see pmr::NeighborOptions). */
#define PMR_NEIGHBOR_AUTOMATIC 0
#define PMR_NEIGHBOR_DIRECT 1 /**< every message whole, on rail i mod n */
#define PMR_NEIGHBOR_SPLIT 2  /**< every message cut into one fragment per rail (Morie & Nanri) */

/* NOLINTBEGIN(modernize-use-using): a C header */
/** Settings of a neighbour exchange (pmr::NeighborOptions); pmr_neighbor_options_init() fills in
 *  the defaults. Every rank must give the same algorithm, crossover and calibrate setting. */
typedef struct pmr_neighbor_options {
    int algorithm;             /**< PMR_NEIGHBOR_* */
    size_t crossover_bytes;    /**< automatic: split from this size on; 0: environment/calibrate */
    size_t min_fragment_bytes; /**< no fragment smaller; 0: PMR_NEIGHBOR_MIN_FRAGMENT or default */
    int calibrate;             /**< automatic without a crossover: nonzero times both at creation */
    int tag_offset; /**< Cartesian exchanges: added to the tags (several exchanges between ranks) */
} pmr_neighbor_options;

/** One neighbour of an explicit list (pmr::Neighbor): the neighbour lists this rank with the
 *  counts and the tags swapped. rank MPI_PROC_NULL exchanges nothing. Counts are in elements. */
typedef struct pmr_neighbor {
    int rank;
    size_t send_count; /**< elements sent to the neighbour */
    size_t recv_count; /**< elements received from it */
    int send_tag;
    int recv_tag;
} pmr_neighbor;
/* NOLINTEND(modernize-use-using) */

/** Defaults: automatic, sizes from the environment or the provider, calibration on, tag offset
 *  0. Does nothing for NULL. */
void pmr_neighbor_options_init(pmr_neighbor_options* options);

/** Both neighbours of every dimension of the Cartesian communicator `c` (neighbour 2*d for
 *  direction -1, 2*d+1 for +1, the same rules as pmr_communicator_neighbor): counts[i] elements
 *  of `element_size` bytes go to neighbour i (2 * ndims entries; every rank gives the same list).
 *  `send` and `recv` both NULL: library-owned buffers (pmr_neighbor_exchange_send_data); else
 *  arrays of 2 * ndims buffers that outlive the exchange. `options` NULL: the defaults.
 *  Collective over `c`. PMR_ERR_USAGE without a grid; PMR_ERR_SIZE or PMR_ERR_ARGUMENT on both
 *  ends if a neighbour disagrees. */
int pmr_neighbor_exchange_create_cart(pmr_communicator c, const size_t* counts, size_t element_size,
                                      void* const* send, void* const* recv,
                                      const pmr_neighbor_options* options,
                                      pmr_neighbor_exchange* result);
/** An explicit list of `count` neighbours; buffers and options as above (one buffer per
 *  neighbour and side). Collective over the listed neighbours. */
int pmr_neighbor_exchange_create(pmr_communicator c, const pmr_neighbor* neighbors, size_t count,
                                 size_t element_size, void* const* send, void* const* recv,
                                 const pmr_neighbor_options* options,
                                 pmr_neighbor_exchange* result);
/** Number of neighbours (null ones included). */
int pmr_neighbor_exchange_size(pmr_neighbor_exchange x, size_t* size);
/** Buffer of the message to / from neighbour i; NULL for a NULL handle or a bad index. */
void* pmr_neighbor_exchange_send_data(pmr_neighbor_exchange x, size_t i);
void* pmr_neighbor_exchange_recv_data(pmr_neighbor_exchange x, size_t i);
/** Rank of neighbour i (MPI_PROC_NULL for none). */
int pmr_neighbor_exchange_neighbor_rank(pmr_neighbor_exchange x, size_t i, int* rank);
/** What neighbour i's message uses: PMR_NEIGHBOR_DIRECT or PMR_NEIGHBOR_SPLIT, and its fragments
 *  (0 for none, 1 when whole); either pointer may be NULL. */
int pmr_neighbor_exchange_message(pmr_neighbor_exchange x, size_t i, int* algorithm,
                                  size_t* fragments);
/** Largest rail count of the exchange's connections. */
int pmr_neighbor_exchange_rails(pmr_neighbor_exchange x, size_t* rails);
/** Starts a round: send buffers are pmr's until wait returns, receive buffers from start on. */
int pmr_neighbor_exchange_start(pmr_neighbor_exchange x);
int pmr_neighbor_exchange_wait(pmr_neighbor_exchange x);
int pmr_neighbor_exchange_test(pmr_neighbor_exchange x, int* done);
/** start + wait. */
int pmr_neighbor_exchange_run(pmr_neighbor_exchange x);
int pmr_neighbor_exchange_destroy(pmr_neighbor_exchange* x);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PMR_PMR_H */
