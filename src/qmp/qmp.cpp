// SPDX-License-Identifier: MIT
// QMP on pmr: start and end, communicators, the machine, the logical topology, the lattice
// layout, errors and output. Message handles are in messages.cpp, global operations in global.cpp.
#include "internal.hpp"

#include <pmr/error.hpp>

#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

namespace qmp {

State& state() {
    static State s;
    return s;
}

Failure current_failure() {
    try {
        throw;
    } catch (const Failure& failure) {
        return failure;
    } catch (const pmr::Timeout& e) {
        return {QMP_TIMEOUT, e.what()};
    } catch (const pmr::SizeError& e) {
        return {QMP_MEMSIZE_ERR, e.what()};
    } catch (const pmr::ArgumentError& e) {
        return {QMP_INVALID_ARG, e.what()};
    } catch (const pmr::UsageError& e) {
        return {QMP_INVALID_OP, e.what()};
    } catch (const pmr::BootstrapError& e) {
        return {QMP_RTENV_ERR, e.what()};
    } catch (const pmr::Error& e) {
        return {QMP_ERROR, e.what()};
    } catch (const std::bad_alloc&) {
        return {QMP_NOMEM_ERR, "out of memory"};
    } catch (const std::exception& e) {
        return {QMP_ERROR, e.what()};
    } catch (...) {
        return {QMP_ERROR, "unknown exception"};
    }
}

QMP_status_t fail(const char* call, const Failure& failure, QMP_msghandle_t handle) {
    State& s = state();
    s.error = failure.status;
    s.error_text = std::string(call) + ": " + QMP_error_string(failure.status);
    if (!failure.text.empty()) {
        s.error_text += " (" + failure.text + ")";
    }
    if (handle != nullptr) {
        handle->error = failure.status;
        handle->error_text = s.error_text;
    }
    if (s.verbose > 0) {
        QMP_error("%s", s.error_text.c_str());
    }
    return failure.status;
}

void require_initialized() {
    if (!state().initialized) {
        throw Failure{QMP_NOT_INITED, "call QMP_init_msg_passing first"};
    }
}

QMP_comm_t resolve(QMP_comm_t comm) {
    const State& s = state();
    if (!s.initialized) {
        throw Failure{QMP_NOT_INITED, "call QMP_init_msg_passing first"};
    }
    return comm != nullptr ? comm : s.default_comm;
}

void relax(unsigned& rounds) {
    constexpr unsigned spin_rounds = 64;
    if (++rounds > spin_rounds) {
        std::this_thread::yield();
    }
}

int Grid::node_of(const int* c) const {
    int node = 0;
    int stride = 1;
    for (const int axis : order) {
        const int extent = dims[static_cast<std::size_t>(axis)];
        const int x = ((c[axis] % extent) + extent) % extent;
        node += x * stride;
        stride *= extent;
    }
    return node;
}

std::vector<int> Grid::coordinates_of(int node) const {
    std::vector<int> c(dims.size(), 0);
    for (const int axis : order) {
        const int extent = dims[static_cast<std::size_t>(axis)];
        c[static_cast<std::size_t>(axis)] = node % extent;
        node /= extent;
    }
    return c;
}

Grid Grid::make(const int* dims, int ndim, const int* map, int mapdim, int size, int node) {
    if (dims == nullptr || ndim <= 0) {
        throw Failure{QMP_INVALID_ARG, "a topology needs at least one dimension"};
    }
    Grid g;
    long long product = 1;
    for (int i = 0; i < ndim; ++i) {
        if (dims[i] < 1) {
            throw Failure{QMP_INVALID_ARG,
                          "extent " + std::to_string(dims[i]) + " of axis " + std::to_string(i)};
        }
        product *= dims[i];
        g.dims.push_back(dims[i]);
    }
    if (product != size) {
        throw Failure{QMP_INVALID_TOPOLOGY, "the grid holds " + std::to_string(product) +
                                                " nodes, the communicator has " +
                                                std::to_string(size)};
    }
    g.order.resize(static_cast<std::size_t>(ndim));
    std::iota(g.order.begin(), g.order.end(), 0);
    if (map != nullptr && mapdim > 0) {
        if (mapdim != ndim) {
            throw Failure{QMP_INVALID_ARG, "a map of " + std::to_string(mapdim) + " axes for " +
                                               std::to_string(ndim) + " dimensions"};
        }
        std::vector<bool> seen(static_cast<std::size_t>(ndim), false);
        for (int i = 0; i < ndim; ++i) {
            if (map[i] < 0 || map[i] >= ndim || seen[static_cast<std::size_t>(map[i])]) {
                throw Failure{QMP_INVALID_ARG, "the map is not a permutation of the axes"};
            }
            seen[static_cast<std::size_t>(map[i])] = true;
            g.order[static_cast<std::size_t>(i)] = map[i];
        }
    }
    g.coords = g.coordinates_of(node);
    return g;
}

namespace {

QMP_comm_t make_comm(MPI_Comm parent) {
    auto comm = std::make_unique<QMP_comm_struct>();
    MPI_Comm_dup(parent, &comm->mpi);
    MPI_Comm_rank(comm->mpi, &comm->rank);
    MPI_Comm_size(comm->mpi, &comm->size);
    comm->pmr = std::make_unique<pmr::Communicator>(comm->mpi);
    return comm.release();
}

/// Reads the integers after argv[i] (up to the next argument starting with '-' and a letter).
std::vector<int> read_numbers(int argc, char** argv, int& i) {
    std::vector<int> values;
    while (i + 1 < argc) {
        const char* text = argv[i + 1];
        char* end = nullptr;
        const long value = std::strtol(text, &end, 10);
        if (end == text || *end != '\0') {
            break;
        }
        values.push_back(static_cast<int>(value));
        ++i;
    }
    return values;
}

/// Reads and removes -qmp-geom, -qmp-logic-map and -qmp-alloc-map.
void read_arguments(int* argc, char*** argv, std::vector<int>& geometry,
                    std::vector<int>& logic_map, std::vector<int>& alloc_map) {
    if (argc == nullptr || argv == nullptr || *argv == nullptr) {
        return;
    }
    char** args = *argv;
    int kept = 1;
    for (int i = 1; i < *argc; ++i) {
        const char* arg = args[i];
        if (std::strcmp(arg, "-qmp-geom") == 0) {
            geometry = read_numbers(*argc, args, i);
        } else if (std::strcmp(arg, "-qmp-logic-map") == 0) {
            logic_map = read_numbers(*argc, args, i);
        } else if (std::strcmp(arg, "-qmp-alloc-map") == 0) {
            alloc_map = read_numbers(*argc, args, i);
        } else {
            args[kept++] = args[i];
        }
    }
    if (kept < *argc) {
        args[kept] = nullptr;
    }
    *argc = kept;
}

int mpi_level(QMP_thread_level_t level) {
    switch (level) {
    case QMP_THREAD_SINGLE:
        return MPI_THREAD_SINGLE;
    case QMP_THREAD_FUNNELED:
        return MPI_THREAD_FUNNELED;
    default:
        return MPI_THREAD_SERIALIZED;
    }
}

QMP_thread_level_t qmp_level(int level) {
    if (level >= MPI_THREAD_SERIALIZED) {
        return QMP_THREAD_SERIALIZED;
    }
    return level >= MPI_THREAD_FUNNELED ? QMP_THREAD_FUNNELED : QMP_THREAD_SINGLE;
}

/// The prime factors of n, largest first.
std::vector<int> factors(int n) {
    std::vector<int> f;
    for (int p = 2; p * p <= n; ++p) {
        while (n % p == 0) {
            f.push_back(p);
            n /= p;
        }
    }
    if (n > 1) {
        f.push_back(n);
    }
    std::sort(f.rbegin(), f.rend());
    return f;
}

QMP_status_t declare_topology(const char* call, QMP_comm_t comm, const int* dims, int ndim,
                              const int* map, int mapdim) {
    return guarded(call, [&] {
        comm = resolve(comm);
        if (!comm->logical.empty()) {
            throw Failure{QMP_TOPOLOGY_EXISTS, "declare it once per communicator"};
        }
        comm->logical = Grid::make(dims, ndim, map, mapdim, comm->size, comm->rank);
    });
}

int vprint(FILE* stream, const char* kind, const char* format, va_list args) {
    State& s = state();
    int rank = 0;
    int size = 1;
    if (s.initialized) {
        rank = s.job->rank;
        size = s.job->size;
    }
    std::array<char, 256> host{};
    if (s.host.empty()) {
        gethostname(host.data(), host.size() - 1);
        s.host = host.data();
    }
    const int head = std::fprintf(stream, "QMP m%d,n%d@%s%s%s: ", rank, size, s.host.c_str(),
                                  kind[0] != '\0' ? " " : "", kind);
    const int body = std::vfprintf(stream, format, args);
    std::fflush(stream);
    return head < 0 || body < 0 ? -1 : head + body;
}

QMP_status_t set_comm(const char* call, QMP_comm_t& slot, QMP_comm_t comm) {
    return guarded(call, [&] {
        require_initialized();
        if (comm == nullptr) {
            throw Failure{QMP_INVALID_ARG, "null communicator"};
        }
        slot = comm;
    });
}

} // namespace

void destroy(QMP_comm_t comm) {
    if (comm == nullptr) {
        return;
    }
    comm->collectives.clear();
    comm->last_exchange = nullptr;
    comm->exchanges.clear();
    comm->pair = pmr::Connection();
    comm->pmr.reset();
    if (comm->mpi != MPI_COMM_NULL) {
        int finalized = 0;
        MPI_Finalized(&finalized);
        if (finalized == 0) {
            MPI_Comm_free(&comm->mpi);
        }
    }
    delete comm;
}

} // namespace qmp

using qmp::Failure;
using qmp::guarded;
using qmp::state;

extern "C" {

QMP_status_t QMP_init_msg_passing(int* argc, char*** argv, QMP_thread_level_t required,
                                  QMP_thread_level_t* provided) {
    return guarded("QMP_init_msg_passing", [&] {
        qmp::State& s = state();
        if (s.initialized) {
            throw Failure{QMP_ERROR, "QMP is initialised already"};
        }
        if (required < QMP_THREAD_SINGLE || required > QMP_THREAD_MULTIPLE) {
            throw Failure{QMP_INVALID_ARG, "unknown thread level"};
        }
        std::vector<int> geometry;
        std::vector<int> logic_map;
        std::vector<int> alloc_map;
        int initialized = 0;
        MPI_Initialized(&initialized);
        int level = MPI_THREAD_SINGLE;
        if (initialized == 0) {
            if (MPI_Init_thread(argc, argv, qmp::mpi_level(required), &level) != MPI_SUCCESS) {
                throw Failure{QMP_RTENV_ERR, "MPI_Init_thread failed"};
            }
            s.started_mpi = true;
        } else {
            MPI_Query_thread(&level);
        }
        qmp::read_arguments(argc, argv, geometry, logic_map, alloc_map);
        s.level = qmp::qmp_level(level);
        if (provided != nullptr) {
            *provided = s.level;
        }
        s.job = qmp::make_comm(MPI_COMM_WORLD);
        s.job->predefined = true;
        s.allocated = s.job;
        s.default_comm = s.job;
        s.initialized = true;
        s.geometry = geometry;
        s.logic_map = logic_map;
        if (!geometry.empty()) {
            try {
                s.allocated_grid =
                    qmp::Grid::make(geometry.data(), static_cast<int>(geometry.size()),
                                    alloc_map.empty() ? nullptr : alloc_map.data(),
                                    static_cast<int>(alloc_map.size()), s.job->size, s.job->rank);
            } catch (...) {
                s.allocated_grid = {};
                throw;
            }
        }
    });
}

QMP_bool_t QMP_is_initialized(void) {
    return state().initialized ? QMP_TRUE : QMP_FALSE;
}

void QMP_finalize_msg_passing(void) {
    qmp::State& s = state();
    if (!s.initialized) {
        return;
    }
    while (!s.handles.empty()) {
        QMP_msghandle_t h = s.handles.back();
        while (h->owner != nullptr) {
            h = h->owner;
        }
        qmp::destroy(h);
    }
    for (QMP_comm_t comm : s.comms) {
        qmp::destroy(comm);
    }
    s.comms.clear();
    qmp::destroy(s.job);
    const bool finalize = s.started_mpi;
    s = qmp::State{};
    if (finalize) {
        MPI_Finalize();
    }
}

void QMP_abort(int error_code) {
    std::fflush(stdout);
    std::fflush(stderr);
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized != 0) {
        // The message is in the pipe to the launcher; MPICH's launcher ends the job on an abort
        // without forwarding what is still in that pipe (seen in CI: the message lost). A moment
        // for it to be read costs nothing to a job that ends.
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        MPI_Abort(MPI_COMM_WORLD, error_code);
    }
    std::exit(error_code);
}

void QMP_abort_string(int error_code, char* message) {
    if (message != nullptr) {
        QMP_error("%s", message);
    }
    QMP_abort(error_code);
}

// ---- Communicators ---------------------------------------------------------------------------

QMP_comm_t QMP_comm_get_allocated(void) {
    return state().allocated;
}
QMP_comm_t QMP_comm_get_job(void) {
    return state().job;
}
QMP_comm_t QMP_comm_get_default(void) {
    return state().default_comm;
}

QMP_status_t QMP_comm_set_allocated(QMP_comm_t comm) {
    return qmp::set_comm("QMP_comm_set_allocated", state().allocated, comm);
}

QMP_status_t QMP_comm_set_job(QMP_comm_t comm) {
    return qmp::set_comm("QMP_comm_set_job", state().job, comm);
}

QMP_status_t QMP_comm_set_default(QMP_comm_t comm) {
    return qmp::set_comm("QMP_comm_set_default", state().default_comm, comm);
}

QMP_status_t QMP_comm_split(QMP_comm_t comm, int color, int key, QMP_comm_t* newcomm) {
    return guarded("QMP_comm_split", [&] {
        comm = qmp::resolve(comm);
        if (newcomm == nullptr || color < 0) {
            throw Failure{QMP_INVALID_ARG,
                          newcomm == nullptr ? "null result pointer" : "negative color"};
        }
        // Every node learns every color, to count them.
        std::vector<int> colors(static_cast<std::size_t>(comm->size));
        MPI_Allgather(&color, 1, MPI_INT, colors.data(), 1, MPI_INT, comm->mpi);
        std::sort(colors.begin(), colors.end());
        const auto distinct = std::unique(colors.begin(), colors.end()) - colors.begin();
        MPI_Comm split = MPI_COMM_NULL;
        if (MPI_Comm_split(comm->mpi, color, key, &split) != MPI_SUCCESS) {
            throw Failure{QMP_ERROR, "MPI_Comm_split failed"};
        }
        QMP_comm_t made = nullptr;
        try {
            made = qmp::make_comm(split);
        } catch (...) {
            MPI_Comm_free(&split);
            throw;
        }
        MPI_Comm_free(&split);
        made->color = color;
        made->key = key;
        made->colors = static_cast<int>(distinct);
        state().comms.push_back(made);
        *newcomm = made;
    });
}

QMP_status_t QMP_comm_free(QMP_comm_t comm) {
    return guarded("QMP_comm_free", [&] {
        qmp::require_initialized();
        qmp::State& s = state();
        auto it = std::find(s.comms.begin(), s.comms.end(), comm);
        if (comm == nullptr || it == s.comms.end()) {
            throw Failure{QMP_INVALID_ARG, "not a communicator of QMP_comm_split"};
        }
        for (QMP_msghandle_t h : s.handles) {
            if (h->comm == comm) {
                throw Failure{QMP_MEMUSED_ERR, "message handles on it are still declared"};
            }
        }
        if (s.default_comm == comm) {
            s.default_comm = s.job;
        }
        if (s.allocated == comm) {
            s.allocated = s.job;
        }
        s.comms.erase(it);
        qmp::destroy(comm);
    });
}

int QMP_comm_get_number_of_colors(QMP_comm_t comm) {
    return comm != nullptr ? comm->colors : 1;
}
int QMP_comm_get_color(QMP_comm_t comm) {
    return comm != nullptr ? comm->color : 0;
}
int QMP_comm_get_key(QMP_comm_t comm) {
    return comm != nullptr ? comm->key : 0;
}

QMP_status_t QMP_get_mpi_comm(QMP_comm_t comm, void** mpicomm) {
    return guarded("QMP_get_mpi_comm", [&] {
        comm = qmp::resolve(comm);
        if (mpicomm == nullptr) {
            throw Failure{QMP_INVALID_ARG, "null result pointer"};
        }
        *mpicomm = &comm->mpi;
    });
}

// ---- The machine -----------------------------------------------------------------------------

QMP_ictype_t QMP_get_msg_passing_type(void) {
    return state().allocated_grid.empty() ? QMP_SWITCH : QMP_GRID;
}

int QMP_get_number_of_nodes(void) {
    return QMP_comm_get_number_of_nodes(nullptr);
}
int QMP_comm_get_number_of_nodes(QMP_comm_t comm) {
    if (!state().initialized) {
        return 0;
    }
    return (comm != nullptr ? comm : state().default_comm)->size;
}
int QMP_get_node_number(void) {
    return QMP_comm_get_node_number(nullptr);
}
int QMP_comm_get_node_number(QMP_comm_t comm) {
    if (!state().initialized) {
        return -1;
    }
    return (comm != nullptr ? comm : state().default_comm)->rank;
}
int QMP_get_number_of_jobs(void) {
    return 1;
}
int QMP_get_job_number(void) {
    return 0;
}
int QMP_get_number_of_job_geometry_dimensions(void) {
    return QMP_get_allocated_number_of_dimensions();
}
const int* QMP_get_job_geometry(void) {
    return QMP_get_allocated_dimensions();
}
QMP_bool_t QMP_is_primary_node(void) {
    return QMP_comm_is_primary_node(nullptr);
}
QMP_bool_t QMP_comm_is_primary_node(QMP_comm_t comm) {
    return QMP_comm_get_node_number(comm) == 0 ? QMP_TRUE : QMP_FALSE;
}

int QMP_get_allocated_number_of_dimensions(void) {
    return static_cast<int>(state().allocated_grid.dims.size());
}
const int* QMP_get_allocated_dimensions(void) {
    const auto& g = state().allocated_grid;
    return g.empty() ? nullptr : g.dims.data();
}
const int* QMP_get_allocated_coordinates(void) {
    const auto& g = state().allocated_grid;
    return g.empty() ? nullptr : g.coords.data();
}
int QMP_get_SMP_count(void) {
    return 1;
}
int QMP_io_node(int node) {
    return node;
}
int QMP_master_io_node(void) {
    return 0;
}

// ---- Logical topology ------------------------------------------------------------------------

QMP_status_t QMP_declare_logical_topology(const int dims[], int ndim) {
    return QMP_comm_declare_logical_topology(nullptr, dims, ndim);
}

QMP_status_t QMP_comm_declare_logical_topology(QMP_comm_t comm, const int dims[], int ndim) {
    // -qmp-logic-map orders the axes of topologies declared without a map of their own.
    const auto& map = state().logic_map;
    const bool use_map = !map.empty() && static_cast<int>(map.size()) == ndim;
    return qmp::declare_topology("QMP_declare_logical_topology", comm, dims, ndim,
                                 use_map ? map.data() : nullptr,
                                 use_map ? static_cast<int>(map.size()) : 0);
}

QMP_status_t QMP_declare_logical_topology_map(const int dims[], int ndim, const int map[],
                                              int mapdim) {
    return QMP_comm_declare_logical_topology_map(nullptr, dims, ndim, map, mapdim);
}

QMP_status_t QMP_comm_declare_logical_topology_map(QMP_comm_t comm, const int dims[], int ndim,
                                                   const int map[], int mapdim) {
    return qmp::declare_topology("QMP_declare_logical_topology_map", comm, dims, ndim, map, mapdim);
}

QMP_bool_t QMP_logical_topology_is_declared(void) {
    return QMP_comm_logical_topology_is_declared(nullptr);
}
QMP_bool_t QMP_comm_logical_topology_is_declared(QMP_comm_t comm) {
    if (!state().initialized) {
        return QMP_FALSE;
    }
    return (comm != nullptr ? comm : state().default_comm)->logical.empty() ? QMP_FALSE : QMP_TRUE;
}

int QMP_get_logical_number_of_dimensions(void) {
    return QMP_comm_get_logical_number_of_dimensions(nullptr);
}
int QMP_comm_get_logical_number_of_dimensions(QMP_comm_t comm) {
    if (!state().initialized) {
        return 0;
    }
    return static_cast<int>((comm != nullptr ? comm : state().default_comm)->logical.dims.size());
}
const int* QMP_get_logical_dimensions(void) {
    return QMP_comm_get_logical_dimensions(nullptr);
}
const int* QMP_comm_get_logical_dimensions(QMP_comm_t comm) {
    if (!state().initialized) {
        return nullptr;
    }
    const auto& g = (comm != nullptr ? comm : state().default_comm)->logical;
    return g.empty() ? nullptr : g.dims.data();
}
const int* QMP_get_logical_coordinates(void) {
    return QMP_comm_get_logical_coordinates(nullptr);
}
const int* QMP_comm_get_logical_coordinates(QMP_comm_t comm) {
    if (!state().initialized) {
        return nullptr;
    }
    const auto& g = (comm != nullptr ? comm : state().default_comm)->logical;
    return g.empty() ? nullptr : g.coords.data();
}

void QMP_comm_get_logical_coordinates_from2(QMP_comm_t comm, int coords[], int node) {
    const QMP_status_t rc = guarded("QMP_get_logical_coordinates_from", [&] {
        comm = qmp::resolve(comm);
        if (comm->logical.empty()) {
            throw Failure{QMP_INVALID_TOPOLOGY, "no logical topology declared"};
        }
        if (coords == nullptr || node < 0 || node >= comm->size) {
            throw Failure{QMP_NODE_OUTRANGE, "node " + std::to_string(node)};
        }
        const auto c = comm->logical.coordinates_of(node);
        std::copy(c.begin(), c.end(), coords);
    });
    static_cast<void>(rc);
}
void QMP_get_logical_coordinates_from2(int coords[], int node) {
    QMP_comm_get_logical_coordinates_from2(nullptr, coords, node);
}
int* QMP_comm_get_logical_coordinates_from(QMP_comm_t comm, int node) {
    const int n = QMP_comm_get_logical_number_of_dimensions(comm);
    if (n == 0 || node < 0 || node >= QMP_comm_get_number_of_nodes(comm)) {
        qmp::fail("QMP_get_logical_coordinates_from",
                  {n == 0 ? QMP_INVALID_TOPOLOGY : QMP_NODE_OUTRANGE, "no such coordinates"});
        return nullptr;
    }
    // NOLINTNEXTLINE(cppcoreguidelines-no-malloc): QMP's callers release it with free()
    auto* coords = static_cast<int*>(std::malloc(sizeof(int) * static_cast<std::size_t>(n)));
    if (coords != nullptr) {
        QMP_comm_get_logical_coordinates_from2(comm, coords, node);
    }
    return coords;
}
int* QMP_get_logical_coordinates_from(int node) {
    return QMP_comm_get_logical_coordinates_from(nullptr, node);
}

int QMP_comm_get_node_number_from(QMP_comm_t comm, const int coordinates[]) {
    if (!state().initialized || coordinates == nullptr) {
        return -1;
    }
    comm = comm != nullptr ? comm : state().default_comm;
    return comm->logical.empty() ? -1 : comm->logical.node_of(coordinates);
}
int QMP_get_node_number_from(const int coordinates[]) {
    return QMP_comm_get_node_number_from(nullptr, coordinates);
}

// ---- The lattice -----------------------------------------------------------------------------

QMP_status_t QMP_comm_layout_grid(QMP_comm_t comm, const int dimensions[], int ndims) {
    return guarded("QMP_layout_grid", [&] {
        comm = qmp::resolve(comm);
        if (dimensions == nullptr || ndims <= 0) {
            throw Failure{QMP_INVALID_ARG, "a lattice needs at least one dimension"};
        }
        for (int i = 0; i < ndims; ++i) {
            if (dimensions[i] < 1) {
                throw Failure{QMP_INVALID_ARG, "lattice extent " + std::to_string(dimensions[i])};
            }
        }
        if (comm->logical.empty()) {
            std::vector<int> grid(static_cast<std::size_t>(ndims), 1);
            const auto& geometry = state().geometry;
            if (!geometry.empty() && comm == state().job) {
                // The allocated grid (-qmp-geom), padded with 1 or cut to the lattice's rank.
                for (std::size_t i = 0; i < grid.size() && i < geometry.size(); ++i) {
                    grid[i] = geometry[i];
                }
            } else {
                // Cut the largest local extent by each prime factor of the node count in turn.
                std::vector<int> local(dimensions, dimensions + ndims);
                for (const int p : qmp::factors(comm->size)) {
                    int best = -1;
                    for (int i = 0; i < ndims; ++i) {
                        if (local[static_cast<std::size_t>(i)] % p == 0 &&
                            (best < 0 || local[static_cast<std::size_t>(i)] >
                                             local[static_cast<std::size_t>(best)])) {
                            best = i;
                        }
                    }
                    if (best < 0) {
                        throw Failure{QMP_INVALID_ARG, "the lattice cannot be divided among " +
                                                           std::to_string(comm->size) + " nodes"};
                    }
                    local[static_cast<std::size_t>(best)] /= p;
                    grid[static_cast<std::size_t>(best)] *= p;
                }
            }
            const QMP_status_t rc = QMP_comm_declare_logical_topology(comm, grid.data(), ndims);
            if (rc != QMP_SUCCESS) {
                throw Failure{rc, state().error_text};
            }
        }
        const auto& g = comm->logical;
        if (static_cast<int>(g.dims.size()) != ndims) {
            throw Failure{QMP_INVALID_TOPOLOGY,
                          "the declared topology has " + std::to_string(g.dims.size()) +
                              " dimensions, the lattice " + std::to_string(ndims)};
        }
        std::vector<int> sub(static_cast<std::size_t>(ndims));
        int sites = 1;
        for (int i = 0; i < ndims; ++i) {
            const int n = g.dims[static_cast<std::size_t>(i)];
            if (dimensions[i] % n != 0) {
                throw Failure{QMP_INVALID_ARG, "lattice extent " + std::to_string(dimensions[i]) +
                                                   " of axis " + std::to_string(i) +
                                                   " is not a multiple of " + std::to_string(n)};
            }
            sub[static_cast<std::size_t>(i)] = dimensions[i] / n;
            sites *= sub[static_cast<std::size_t>(i)];
        }
        comm->subgrid = sub;
        comm->subgrid_sites = sites;
    });
}

QMP_status_t QMP_layout_grid(const int dimensions[], int ndims) {
    return QMP_comm_layout_grid(nullptr, dimensions, ndims);
}

int QMP_get_number_of_subgrid_dimensions(void) {
    return state().initialized ? static_cast<int>(state().default_comm->subgrid.size()) : 0;
}
const int* QMP_get_subgrid_dimensions(void) {
    if (!state().initialized || state().default_comm->subgrid.empty()) {
        return nullptr;
    }
    return state().default_comm->subgrid.data();
}
int QMP_get_number_of_subgrid_sites(void) {
    return state().initialized ? state().default_comm->subgrid_sites : 0;
}

// ---- Errors and output -----------------------------------------------------------------------

const char* QMP_error_string(QMP_status_t code) {
    static const char* const texts[] = {
        "general QMP error",
        "QMP is not initialised",
        "the run-time environment (MPI) failed",
        "CPU information not available",
        "node information not available",
        "out of memory",
        "the message is larger than the receiving memory",
        "host name not available",
        "the communication service failed to start",
        "a logical topology is declared already",
        "connection timed out",
        "not supported",
        "the communication service is busy",
        "bad message",
        "invalid argument",
        "invalid topology",
        "no neighbour information (declare a logical topology first)",
        "memory size too large",
        "bad memory for a message",
        "no communication ports left",
        "node number out of range",
        "bad channel definition",
        "memory or handle still in use",
        "operation in the wrong state",
        "timed out (PMR_TIMEOUT)",
    };
    if (code == QMP_SUCCESS) {
        return "success";
    }
    if (code >= QMP_ERROR && code < QMP_MAX_STATUS) {
        return texts[code - QMP_ERROR];
    }
    return "unknown QMP status code";
}

QMP_status_t QMP_get_error_number(QMP_msghandle_t mh) {
    return mh != nullptr ? mh->error : state().error;
}

const char* QMP_get_error_string(QMP_msghandle_t mh) {
    const std::string& text = mh != nullptr ? mh->error_text : state().error_text;
    return text.empty() ? QMP_error_string(QMP_get_error_number(mh)) : text.c_str();
}

int QMP_verbose(int level) {
    const int old = state().verbose;
    state().verbose = level;
    return old;
}

int QMP_profcontrol(int level) {
    const int old = state().profile;
    state().profile = level;
    return old;
}

int QMP_printf(const char* format, ...) {
    va_list args;
    va_start(args, format);
    const int n = qmp::vprint(stdout, "", format, args);
    va_end(args);
    return n;
}

int QMP_fprintf(FILE* stream, const char* format, ...) {
    va_list args;
    va_start(args, format);
    const int n = qmp::vprint(stream != nullptr ? stream : stdout, "", format, args);
    va_end(args);
    return n;
}

int QMP_info(const char* format, ...) {
    va_list args;
    va_start(args, format);
    const int n = qmp::vprint(stdout, "info", format, args);
    va_end(args);
    return n;
}

int QMP_error(const char* format, ...) {
    va_list args;
    va_start(args, format);
    const int n = qmp::vprint(stderr, "error", format, args);
    va_end(args);
    return n;
}

double QMP_time(void) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    return initialized != 0 ? MPI_Wtime() : 0.0;
}

void QMP_reset_total_qmp_time(void) {
    state().qmp_time = 0.0;
}
double QMP_get_total_qmp_time(void) {
    return state().qmp_time;
}

const char* QMP_version_str(void) {
    return QMP_VERSION_STR;
}
int QMP_version_int(void) {
    return QMP_VERSION_CODE;
}

} // extern "C"
