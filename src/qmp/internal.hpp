// SPDX-License-Identifier: MIT
/// @file internal.hpp
/// The state behind qmp.h: communicators with their logical topology and cached collectives,
/// message memory, message handles, and the error and progress helpers every call uses. Built on
/// pmr's public API only (scripts/check-layers.sh).
#pragma once

#include <qmp/qmp.h>

#include <pmr/collectives.hpp>
#include <pmr/communicator.hpp>
#include <pmr/connection.hpp>
#include <pmr/window.hpp>

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

namespace qmp {

/// A failure that a QMP call reports as `status` (never an abort).
struct Failure {
    QMP_status_t status;
    std::string text;
};

/// The grid of a communicator: extents, own coordinates, and the order in which the axes vary
/// with the node number (order[0] fastest).
struct Grid {
    std::vector<int> dims;
    std::vector<int> order;
    std::vector<int> coords;

    bool empty() const noexcept { return dims.empty(); }
    /// Node number of `c` (coordinates wrap around).
    int node_of(const int* c) const;
    /// Coordinates of `node`.
    std::vector<int> coordinates_of(int node) const;
    /// Fills `dims`/`order`/`coords` for `node`; throws Failure for a grid that does not hold
    /// `size` nodes or a bad map.
    static Grid make(const int* dims, int ndim, const int* map, int mapdim, int size, int node);
};

/// Key of a cached collective: what it does, its element type and its element count.
using CollectiveKey = std::tuple<int, int, std::size_t>;

/// The exchange of a global sum on a communicator of two nodes (global.cpp): a send and a receive
/// window on the communicator's pair connection, paired by creation order.
struct PairExchange {
    pmr::SendWindow<std::byte> send;
    pmr::RecvWindow<std::byte> recv;
    bool granted = false; ///< recv granted for the next call
};

} // namespace qmp

struct QMP_comm_struct {
    MPI_Comm mpi = MPI_COMM_NULL; ///< a duplicate this object frees; QMP_get_mpi_comm hands it out
    std::unique_ptr<pmr::Communicator> pmr;
    int rank = 0;
    int size = 1;
    int color = 0;
    int key = 0;
    int colors = 1;
    bool predefined = false; ///< the job communicator, freed only by QMP_finalize_msg_passing
    qmp::Grid logical;
    std::vector<int> subgrid;
    int subgrid_sites = 0;
    /// Persistent collectives, made at the first call of each kind and size (every node makes the
    /// same calls in the same order, so every node makes the same objects).
    std::map<qmp::CollectiveKey, std::unique_ptr<pmr::Collective>> collectives;
    qmp::CollectiveKey last_key{};
    pmr::Collective* last_collective = nullptr; ///< the collective of last_key
    /// Two nodes: sums are exchanges with the other node on a connection of their own, made at
    /// the first sum (global.cpp), with one PairExchange per element type and count.
    pmr::Connection pair;
    std::map<qmp::CollectiveKey, qmp::PairExchange> exchanges;
    qmp::CollectiveKey last_exchange_key{};
    qmp::PairExchange* last_exchange = nullptr; ///< the exchange of last_exchange_key
};

struct QMP_msgmem_struct {
    struct Block {
        std::ptrdiff_t offset; ///< from the base address
        std::size_t bytes;
    };
    char* base = nullptr;
    std::vector<Block> blocks;
    std::size_t bytes = 0;
};

struct QMP_msghandle_struct {
    enum class Kind : unsigned char { send, recv, multiple };
    enum class Phase : unsigned char { idle, active, done };

    Kind kind = Kind::send;
    Phase phase = Phase::idle;
    QMP_comm_t comm = nullptr;
    int peer = -1;
    int axis = -1;
    int dir = 0;
    char* base = nullptr;
    std::vector<QMP_msgmem_struct::Block> blocks;
    std::size_t bytes = 0;
    pmr::Connection connection;
    pmr::SendWindow<std::byte> send;
    pmr::RecvWindow<std::byte> recv;
    /// Contiguous message memory from QMP_allocate_memory (pmr memory): the window lies over it,
    /// no copies, reached by every provider's fastest path; such a handle cannot move.
    bool direct = false;
    bool granted = false;            ///< a receive whose buffer was granted by QMP_clear_to_send
    QMP_msghandle_t owner = nullptr; ///< the multiple handle that holds this one
    std::vector<QMP_msghandle_t> parts;
    bool paired = false;
    QMP_status_t error = QMP_SUCCESS;
    std::string error_text;
};

namespace qmp {

/// The process-wide state of QMP.
struct State {
    bool initialized = false;
    bool started_mpi = false;
    QMP_thread_level_t level = QMP_THREAD_SINGLE;
    QMP_comm_t job = nullptr;
    QMP_comm_t allocated = nullptr;
    QMP_comm_t default_comm = nullptr;
    Grid allocated_grid;        ///< from -qmp-geom / -qmp-alloc-map
    std::vector<int> logic_map; ///< from -qmp-logic-map
    std::vector<int> geometry;  ///< -qmp-geom as given
    int verbose = 0;
    int profile = 0;
    double qmp_time = 0.0;
    std::string host;
    QMP_status_t error = QMP_SUCCESS;
    std::string error_text;
    std::vector<QMP_comm_t> comms;        ///< communicators made by QMP_comm_split
    std::vector<QMP_msghandle_t> handles; ///< every live single handle
    std::vector<QMP_msghandle_t> active;  ///< started and not yet completed
    /// The windows of a wait, kept so that waits allocate nothing.
    std::vector<pmr::detail::Waitable> waitables;
};

State& state();

/// Records a failure as the last error (and on `handle`, if given) and returns its status.
QMP_status_t fail(const char* call, const Failure& failure, QMP_msghandle_t handle = nullptr);
/// Runs `body` and turns every exception into a recorded failure of `call`.
template <class F>
QMP_status_t guarded(const char* call, F&& body, QMP_msghandle_t handle = nullptr);
/// The status of an exception in flight (pmr's errors, bad_alloc, Failure).
Failure current_failure();

/// Throws Failure(QMP_NOT_INITED) unless QMP is initialised.
void require_initialized();
/// The communicator, or the default one for null; throws for an uninitialised QMP.
QMP_comm_t resolve(QMP_comm_t comm);

/// Completes `h` if its transfer has arrived (unpacking received data); true if it is done.
bool poll(QMP_msghandle_t h);
/// Polls every active handle once, so that a rank blocked in one call still completes its
/// other transfers (pmr moves a send whose receiver granted late only in the sender's calls).
void progress_all();
/// Spins politely: a few rounds at full speed, then yields the core.
void relax(unsigned& rounds);

/// Frees what a communicator owns (collectives first: they use its pmr::Communicator).
void destroy(QMP_comm_t comm);
/// Frees a single or multiple handle without the checks of QMP_free_msghandle.
void destroy(QMP_msghandle_t h);

template <class F>
QMP_status_t guarded(const char* call, F&& body, QMP_msghandle_t handle) {
    try {
        body();
        return QMP_SUCCESS;
    } catch (...) {
        return fail(call, current_failure(), handle);
    }
}

} // namespace qmp
