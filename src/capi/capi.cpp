// SPDX-License-Identifier: MIT
// The C interface (include/pmr/pmr.h) over the public C++ API. A handle owns one C++ object; every
// entry point runs its body through guarded(), which turns each exception into its return code and
// records the message for pmr_last_error(), so nothing ever unwinds into C (or Fortran) frames.
#include "base/error.hpp"
#include "capi/internal.h"

#include <pmr/pmr.h>
#include <pmr/pmr.hpp>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <limits>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

struct pmr_connection_s {
    pmr::Connection connection;
};
struct pmr_send_window_s {
    pmr::SendWindow<std::byte> window;
};
struct pmr_recv_window_s {
    pmr::RecvWindow<std::byte> window;
};
struct pmr_communicator_s {
    pmr::Communicator communicator;
};
struct pmr_allreduce_s {
    pmr::detail::CollectiveCore core;
};
struct pmr_barrier_s {
    pmr::detail::CollectiveCore core;
};
struct pmr_neighbor_exchange_s {
    pmr::detail::NeighborCore core;
};

namespace {

/// Message of this thread's last failed call. `fallback` is used when the message itself could
/// not be stored (no memory), so that pmr_last_error() always has something to say.
thread_local std::string last_error;
thread_local const char* last_error_fallback = nullptr;

int record(int code, const char* message) noexcept {
    try {
        last_error.assign(message);
        last_error_fallback = nullptr;
    } catch (...) {
        last_error_fallback = "pmr: out of memory (the error message could not be stored).";
    }
    return code;
}

int record_resource(const char* function, const char* what) noexcept {
    try {
        return record(PMR_ERR_NO_MEMORY, (std::string(what) + " (in " + function + ")").c_str());
    } catch (...) {
        return record(PMR_ERR_NO_MEMORY, what);
    }
}

int record_no_memory(const char* function) noexcept {
    try {
        return record(PMR_ERR_NO_MEMORY, pmr::detail::compose("out of memory", function,
                                                              "Free memory or use smaller windows.")
                                             .c_str());
    } catch (...) {
        return record(PMR_ERR_NO_MEMORY, "pmr: out of memory.");
    }
}

/// Runs `body`; PMR_SUCCESS if it returns, the code of the exception (and its message recorded)
/// if it throws. The most derived pmr types come first.
template <class Body>
int guarded(const char* function, Body&& body) noexcept {
    try {
        body();
        return PMR_SUCCESS;
    } catch (const pmr::UsageError& e) {
        return record(PMR_ERR_USAGE, e.what());
    } catch (const pmr::ArgumentError& e) {
        return record(PMR_ERR_ARGUMENT, e.what());
    } catch (const pmr::SizeError& e) {
        return record(PMR_ERR_SIZE, e.what());
    } catch (const pmr::ResourceError& e) {
        // A limit reached (memory, mappings, descriptors, shared memory): the program can free
        // or raise something, as for memory it could not have.
        return record_resource(function, e.what());
    } catch (const pmr::ProviderError& e) {
        return record(PMR_ERR_PROVIDER, e.what());
    } catch (const pmr::BootstrapError& e) {
        return record(PMR_ERR_BOOTSTRAP, e.what());
    } catch (const pmr::Timeout& e) {
        return record(PMR_ERR_TIMEOUT, e.what());
    } catch (const pmr::PeerLost& e) {
        return record(PMR_ERR_PEER_LOST, e.what());
    } catch (const std::bad_alloc&) {
        return record_no_memory(function);
    } catch (const std::exception& e) {
        return record(PMR_ERR_OTHER, e.what());
    } catch (...) {
        return record(PMR_ERR_OTHER, "pmr: an unknown exception was caught in the C interface.");
    }
}

/// The object behind a handle, or ArgumentError naming the call if the handle is NULL.
template <class Handle>
Handle& deref(Handle* handle, const char* kind, const char* function) {
    if (handle == nullptr) {
        pmr::detail::raise<pmr::ArgumentError>(std::string("the ") + kind + " handle is NULL",
                                               function,
                                               std::string("Pass a handle made by pmr_") + kind +
                                                   "_create (destroy sets handles to NULL).");
    }
    return *handle;
}

/// An output pointer, checked for NULL.
template <class T>
T& out(T* pointer, const char* name, const char* function) {
    if (pointer == nullptr) {
        pmr::detail::raise<pmr::ArgumentError>(std::string("the output pointer `") + name +
                                                   "` is NULL",
                                               function, "Pass the address of a variable.");
    }
    return *pointer;
}

pmr::Connection& connection_of(pmr_connection c, const char* function) {
    return deref(c, "connection", function).connection;
}
pmr::SendWindow<std::byte>& window_of(pmr_send_window w, const char* function) {
    return deref(w, "send_window", function).window;
}
pmr::RecvWindow<std::byte>& window_of(pmr_recv_window w, const char* function) {
    return deref(w, "recv_window", function).window;
}
pmr::Communicator& communicator_of(pmr_communicator c, const char* function) {
    return deref(c, "communicator", function).communicator;
}

template <class Handle>
pmr::detail::CollectiveCore& core_of(Handle* handle, const char* kind, const char* function) {
    return deref(handle, kind, function).core;
}

/// An int of the C interface as one of the enumerators [0, last] of E.
template <class E>
E enumerator(int value, int last, const char* name, const char* function) {
    if (value < 0 || value > last) {
        pmr::detail::raise<pmr::ArgumentError>(std::string(name) + " " + std::to_string(value) +
                                                   " is unknown",
                                               function, "Pass one of the PMR_* constants.");
    }
    return static_cast<E>(value);
}

/// Creates a window of either side: over `buffer`, or library-owned if `buffer` is NULL.
template <class Handle, class Window>
int create_window(const char* function, pmr_connection c, void* buffer, std::size_t bytes,
                  Handle** result) {
    return guarded(function, [&] {
        Handle*& handle = out(result, "out", function);
        handle = nullptr;
        const pmr::Connection& connection = connection_of(c, function);
        handle = buffer == nullptr
                     ? new Handle{Window(connection, bytes)}
                     : new Handle{Window(connection, static_cast<std::byte*>(buffer), bytes)};
    });
}

template <class Handle>
int destroy(const char* function, Handle** handle) {
    return guarded(function, [&] {
        Handle*& h = out(handle, "handle", function);
        delete h; // destructors of pmr objects do not throw
        h = nullptr;
    });
}

template <class Window>
int test_window(const char* function, Window& window, int* done) {
    return guarded(function, [&] {
        int& result = out(done, "done", function);
        result = 0;
        result = window_of(window, function).test() ? 1 : 0;
    });
}

/// The memory of a window, NULL (and the error recorded) for a NULL handle.
template <class Window>
void* window_data(const char* function, Window w) noexcept {
    void* data = nullptr;
    guarded(function, [&] { data = window_of(w, function).data(); });
    return data;
}

/// Calls f(list, count) with the windows of pmr_wait_all()/pmr_test_all() as the core's list,
/// sends first; a halo's few windows on the stack (no allocation in a loop of exchanges).
template <class F>
void with_waitables(const pmr_send_window* sends, std::size_t nsends, const pmr_recv_window* recvs,
                    std::size_t nrecvs, const char* function, F&& f) {
    if ((sends == nullptr && nsends > 0) || (recvs == nullptr && nrecvs > 0)) {
        pmr::detail::raise<pmr::ArgumentError>(
            std::string("the array of ") + (sends == nullptr && nsends > 0 ? "send" : "receive") +
                " windows is NULL with a count above 0",
            function, "Pass the array, or a count of 0.");
    }
    if (nsends > std::numeric_limits<std::size_t>::max() - nrecvs) {
        pmr::detail::raise<pmr::ArgumentError>("the counts of windows overflow", function);
    }
    constexpr std::size_t on_stack = 64;
    std::array<pmr::detail::Waitable, on_stack> few{};
    std::vector<pmr::detail::Waitable> many;
    pmr::detail::Waitable* list = few.data();
    if (nsends + nrecvs > on_stack) {
        many.resize(nsends + nrecvs);
        list = many.data();
    }
    for (std::size_t i = 0; i < nsends; ++i) {
        list[i] = pmr::detail::waitable(window_of(sends[i], function));
    }
    for (std::size_t i = 0; i < nrecvs; ++i) {
        list[nsends + i] = pmr::detail::waitable(window_of(recvs[i], function));
    }
    f(static_cast<const pmr::detail::Waitable*>(list), nsends + nrecvs);
}

} // namespace

extern "C" {

const char* pmr_last_error(void) {
    return last_error_fallback != nullptr ? last_error_fallback : last_error.c_str();
}

const char* pmr_error_name(int code) {
    switch (code) {
    case PMR_SUCCESS:
        return "PMR_SUCCESS";
    case PMR_ERR_USAGE:
        return "PMR_ERR_USAGE";
    case PMR_ERR_ARGUMENT:
        return "PMR_ERR_ARGUMENT";
    case PMR_ERR_SIZE:
        return "PMR_ERR_SIZE";
    case PMR_ERR_PROVIDER:
        return "PMR_ERR_PROVIDER";
    case PMR_ERR_BOOTSTRAP:
        return "PMR_ERR_BOOTSTRAP";
    case PMR_ERR_TIMEOUT:
        return "PMR_ERR_TIMEOUT";
    case PMR_ERR_PEER_LOST:
        return "PMR_ERR_PEER_LOST";
    case PMR_ERR_NO_MEMORY:
        return "PMR_ERR_NO_MEMORY";
    case PMR_ERR_OTHER:
        return "PMR_ERR_OTHER";
    default:
        return "PMR_ERR_UNKNOWN";
    }
}

int pmr_capi_record_error(int code, const char* message) {
    return record(code, message != nullptr ? message : "pmr: unknown error.");
}

int pmr_capi_run_guarded(const char* function, void (*body)(void*), void* context) {
    return guarded(function, [&] { body(context); });
}

// --- connections -------------------------------------------------------------------------------

int pmr_connection_create(MPI_Comm comm, int peer, int send_tag, int recv_tag,
                          pmr_connection* result) {
    constexpr const char* function = "pmr_connection_create";
    return guarded(function, [&] {
        pmr_connection& handle = out(result, "out", function);
        handle = nullptr;
        handle = new pmr_connection_s{pmr::Connection(pmr::Target(comm, peer, send_tag, recv_tag))};
    });
}

int pmr_connection_destroy(pmr_connection* connection) {
    return destroy("pmr_connection_destroy", connection);
}

int pmr_connection_establish(pmr_connection c) {
    constexpr const char* function = "pmr_connection_establish";
    return guarded(function, [&] { connection_of(c, function).establish(); });
}

namespace {

/// Writes `provider` with its terminating 0 into name[0, length).
void write_name(std::string_view provider, char* name, size_t length, const char* function) {
    char& first = out(name, "name", function);
    if (provider.size() >= length) {
        pmr::detail::raise<pmr::SizeError>("the provider name '" + std::string(provider) +
                                               "' needs " + std::to_string(provider.size() + 1) +
                                               " bytes, the buffer has " + std::to_string(length),
                                           function,
                                           "Pass a larger buffer (32 bytes are always enough).");
    }
    std::memcpy(&first, provider.data(), provider.size());
    name[provider.size()] = '\0';
}

} // namespace

int pmr_connection_provider(pmr_connection c, char* name, size_t length) {
    constexpr const char* function = "pmr_connection_provider";
    return guarded(function, [&] {
        out(name, "name", function);
        write_name(pmr::to_string(connection_of(c, function).provider()), name, length, function);
    });
}

int pmr_connection_established(pmr_connection c, int* established) {
    constexpr const char* function = "pmr_connection_established";
    return guarded(function, [&] {
        int& result = out(established, "established", function);
        result = connection_of(c, function).established() ? 1 : 0;
    });
}

int pmr_connection_chosen_provider(pmr_connection c, char* name, size_t length, int* chosen) {
    constexpr const char* function = "pmr_connection_chosen_provider";
    return guarded(function, [&] {
        int& result = out(chosen, "chosen", function);
        out(name, "name", function);
        const std::optional<pmr::Provider> provider = connection_of(c, function).chosen_provider();
        write_name(provider ? pmr::to_string(*provider) : std::string_view(), name, length,
                   function);
        result = provider ? 1 : 0;
    });
}

// --- windows -------------------------------------------------------------------------------------

int pmr_send_window_create(pmr_connection c, void* buffer, size_t bytes, pmr_send_window* result) {
    return create_window<pmr_send_window_s, pmr::SendWindow<std::byte>>("pmr_send_window_create", c,
                                                                        buffer, bytes, result);
}

int pmr_recv_window_create(pmr_connection c, void* buffer, size_t bytes, pmr_recv_window* result) {
    return create_window<pmr_recv_window_s, pmr::RecvWindow<std::byte>>("pmr_recv_window_create", c,
                                                                        buffer, bytes, result);
}

void* pmr_send_window_data(pmr_send_window w) {
    return window_data("pmr_send_window_data", w);
}

void* pmr_recv_window_data(pmr_recv_window w) {
    return window_data("pmr_recv_window_data", w);
}

int pmr_send_window_size(pmr_send_window w, size_t* bytes) {
    constexpr const char* function = "pmr_send_window_size";
    return guarded(function,
                   [&] { out(bytes, "bytes", function) = window_of(w, function).bytes(); });
}

int pmr_recv_window_size(pmr_recv_window w, size_t* bytes) {
    constexpr const char* function = "pmr_recv_window_size";
    return guarded(function,
                   [&] { out(bytes, "bytes", function) = window_of(w, function).bytes(); });
}

int pmr_send_window_init(pmr_send_window w) {
    constexpr const char* function = "pmr_send_window_init";
    return guarded(function, [&] { window_of(w, function).init(); });
}

int pmr_send_window_post(pmr_send_window w, size_t bytes) {
    constexpr const char* function = "pmr_send_window_post";
    return guarded(function, [&] { window_of(w, function).post(pmr::Elements{bytes}); });
}

int pmr_send_window_wait(pmr_send_window w) {
    constexpr const char* function = "pmr_send_window_wait";
    return guarded(function, [&] { window_of(w, function).wait(); });
}

int pmr_send_window_wait_timeout(pmr_send_window w, double seconds) {
    constexpr const char* function = "pmr_send_window_wait_timeout";
    return guarded(function,
                   [&] { window_of(w, function).wait(std::chrono::duration<double>(seconds)); });
}

int pmr_send_window_test(pmr_send_window w, int* done) {
    return test_window("pmr_send_window_test", w, done);
}

int pmr_recv_window_init(pmr_recv_window w) {
    constexpr const char* function = "pmr_recv_window_init";
    return guarded(function, [&] { window_of(w, function).init(); });
}

int pmr_recv_window_post(pmr_recv_window w) {
    constexpr const char* function = "pmr_recv_window_post";
    return guarded(function, [&] { window_of(w, function).post(); });
}

int pmr_recv_window_wait(pmr_recv_window w) {
    constexpr const char* function = "pmr_recv_window_wait";
    return guarded(function, [&] { window_of(w, function).wait(); });
}

int pmr_recv_window_wait_timeout(pmr_recv_window w, double seconds) {
    constexpr const char* function = "pmr_recv_window_wait_timeout";
    return guarded(function,
                   [&] { window_of(w, function).wait(std::chrono::duration<double>(seconds)); });
}

int pmr_recv_window_test(pmr_recv_window w, int* done) {
    return test_window("pmr_recv_window_test", w, done);
}

int pmr_recv_window_received_bytes(pmr_recv_window w, size_t* bytes) {
    constexpr const char* function = "pmr_recv_window_received_bytes";
    return guarded(function, [&] {
        size_t& result = out(bytes, "bytes", function);
        result = window_of(w, function).received_bytes();
    });
}

int pmr_wait_all(const pmr_send_window* sends, size_t nsends, const pmr_recv_window* recvs,
                 size_t nrecvs) {
    constexpr const char* function = "pmr_wait_all";
    return guarded(function, [&] {
        with_waitables(sends, nsends, recvs, nrecvs, function,
                       [](const pmr::detail::Waitable* list, std::size_t count) {
                           pmr::detail::wait_all(list, count);
                       });
    });
}

int pmr_wait_all_timeout(const pmr_send_window* sends, size_t nsends, const pmr_recv_window* recvs,
                         size_t nrecvs, double seconds) {
    constexpr const char* function = "pmr_wait_all_timeout";
    return guarded(function, [&] {
        with_waitables(sends, nsends, recvs, nrecvs, function,
                       [seconds](const pmr::detail::Waitable* list, std::size_t count) {
                           pmr::detail::wait_all(list, count, seconds);
                       });
    });
}

int pmr_test_all(const pmr_send_window* sends, size_t nsends, const pmr_recv_window* recvs,
                 size_t nrecvs, int* done) {
    constexpr const char* function = "pmr_test_all";
    return guarded(function, [&] {
        int& result = out(done, "done", function);
        result = 0;
        with_waitables(sends, nsends, recvs, nrecvs, function,
                       [&result](const pmr::detail::Waitable* list, std::size_t count) {
                           result = pmr::detail::test_all(list, count) ? 1 : 0;
                       });
    });
}

int pmr_send_window_destroy(pmr_send_window* w) {
    return destroy("pmr_send_window_destroy", w);
}

int pmr_recv_window_destroy(pmr_recv_window* w) {
    return destroy("pmr_recv_window_destroy", w);
}

// --- Cartesian grids ---------------------------------------------------------------------------

int pmr_communicator_create(MPI_Comm comm, int ndims, const int* dims, const int* periods,
                            int reorder, pmr_communicator* result) {
    constexpr const char* function = "pmr_communicator_create";
    return guarded(function, [&] {
        pmr_communicator& handle = out(result, "out", function);
        handle = nullptr;
        if (ndims < 0) {
            pmr::detail::raise<pmr::ArgumentError>(
                "ndims is " + std::to_string(ndims), function,
                "Pass the number of grid dimensions, or 0 to wrap the communicator as it is.");
        }
        if (ndims == 0) {
            handle = new pmr_communicator_s{pmr::Communicator(comm)};
            return;
        }
        if (dims == nullptr) {
            pmr::detail::raise<pmr::ArgumentError>(
                "dims is NULL for " + std::to_string(ndims) + " dimensions", function,
                "Pass one extent per dimension (0: chosen by MPI_Dims_create).");
        }
        const auto n = static_cast<std::size_t>(ndims);
        std::vector<int> extents(dims, dims + n);
        std::vector<bool> periodic(n, false);
        for (std::size_t d = 0; periods != nullptr && d < n; ++d) {
            periodic[d] = periods[d] != 0;
        }
        handle = new pmr_communicator_s{
            pmr::Communicator(comm, std::move(extents), std::move(periodic), reorder != 0)};
    });
}

int pmr_communicator_destroy(pmr_communicator* c) {
    return destroy("pmr_communicator_destroy", c);
}

int pmr_communicator_comm(pmr_communicator c, MPI_Comm* comm) {
    constexpr const char* function = "pmr_communicator_comm";
    return guarded(function,
                   [&] { out(comm, "comm", function) = communicator_of(c, function).get(); });
}

int pmr_communicator_rank(pmr_communicator c, int* rank) {
    constexpr const char* function = "pmr_communicator_rank";
    return guarded(function,
                   [&] { out(rank, "rank", function) = communicator_of(c, function).rank(); });
}

int pmr_communicator_size(pmr_communicator c, int* size) {
    constexpr const char* function = "pmr_communicator_size";
    return guarded(function,
                   [&] { out(size, "size", function) = communicator_of(c, function).size(); });
}

int pmr_communicator_dimensions(pmr_communicator c, int* ndims) {
    constexpr const char* function = "pmr_communicator_dimensions";
    return guarded(function, [&] {
        out(ndims, "ndims", function) = communicator_of(c, function).dimensions();
    });
}

int pmr_communicator_grid(pmr_communicator c, int maxdims, int* dims, int* periods, int* coords) {
    constexpr const char* function = "pmr_communicator_grid";
    return guarded(function, [&] {
        const pmr::Communicator& communicator = communicator_of(c, function);
        const int n = communicator.dimensions();
        if (n == 0) {
            pmr::detail::raise<pmr::UsageError>(
                "the communicator has no Cartesian grid", function,
                "Create it with ndims > 0, or wrap a communicator made by MPI_Cart_create.");
        }
        if (maxdims < 0) {
            pmr::detail::raise<pmr::ArgumentError>("maxdims is " + std::to_string(maxdims),
                                                   function, "Pass the length of the arrays.");
        }
        for (int d = 0; d < n && d < maxdims; ++d) {
            const auto i = static_cast<std::size_t>(d);
            if (dims != nullptr) {
                dims[i] = communicator.size(d);
            }
            if (periods != nullptr) {
                periods[i] = communicator.periodic(d) ? 1 : 0;
            }
            if (coords != nullptr) {
                coords[i] = communicator.coordinate(d);
            }
        }
    });
}

int pmr_communicator_neighbor(pmr_communicator c, int dimension, int direction, int* rank) {
    constexpr const char* function = "pmr_communicator_neighbor";
    return guarded(function, [&] {
        int& result = out(rank, "rank", function);
        result = communicator_of(c, function).neighbor(dimension, direction);
    });
}

int pmr_connection_create_neighbor(pmr_communicator c, int dimension, int direction, int tag_offset,
                                   pmr_connection* result) {
    constexpr const char* function = "pmr_connection_create_neighbor";
    return guarded(function, [&] {
        pmr_connection& handle = out(result, "out", function);
        handle = nullptr;
        const pmr::Communicator& communicator = communicator_of(c, function);
        handle = new pmr_connection_s{
            pmr::Connection(communicator.target(dimension, direction, tag_offset))};
    });
}

// ---- Collectives ----------------------------------------------------------------------------

int pmr_allreduce_create(pmr_communicator c, const void* in, void* out_buffer, size_t count,
                         int datatype, int op, int algorithm, int order, pmr_allreduce* result) {
    constexpr const char* function = "pmr_allreduce_create";
    return guarded(function, [&] {
        pmr_allreduce& handle = out(result, "result", function);
        handle = nullptr;
        using Kind = pmr::detail::ElementKind;
        constexpr Kind kinds[] = {Kind::f32, Kind::f64, Kind::i32, Kind::i64, Kind::c32, Kind::c64};
        static_assert(PMR_ALLREDUCE_TRINARYX3 ==
                          static_cast<int>(pmr::AllreduceAlgorithm::trinaryx3) &&
                      PMR_ALLREDUCE_DIRECT == static_cast<int>(pmr::AllreduceAlgorithm::direct));
        const auto type = enumerator<int>(datatype, 5, "datatype", function);
        pmr::AllreduceOptions options;
        options.algorithm =
            enumerator<pmr::AllreduceAlgorithm>(algorithm, 4, "algorithm", function);
        options.order = enumerator<pmr::ReductionOrder>(order, 1, "order", function);
        const auto operation = enumerator<pmr::ReduceOp>(op, 2, "op", function);
        handle = new pmr_allreduce_s{pmr::detail::CollectiveCore::allreduce(
            communicator_of(c, function), kinds[type], count, operation, options, in, out_buffer)};
    });
}

void* pmr_allreduce_data(pmr_allreduce a) {
    constexpr const char* function = "pmr_allreduce_data";
    void* data = nullptr;
    guarded(function, [&] { data = core_of(a, "allreduce", function).data(); });
    return data;
}

int pmr_allreduce_start(pmr_allreduce a) {
    constexpr const char* function = "pmr_allreduce_start";
    return guarded(function, [&] { core_of(a, "allreduce", function).start(); });
}

int pmr_allreduce_wait(pmr_allreduce a) {
    constexpr const char* function = "pmr_allreduce_wait";
    return guarded(function, [&] { core_of(a, "allreduce", function).wait(); });
}

int pmr_allreduce_test(pmr_allreduce a, int* done) {
    constexpr const char* function = "pmr_allreduce_test";
    return guarded(function, [&] {
        int& flag = out(done, "done", function);
        flag = 0;
        flag = core_of(a, "allreduce", function).test() ? 1 : 0;
    });
}

int pmr_allreduce_run(pmr_allreduce a) {
    constexpr const char* function = "pmr_allreduce_run";
    return guarded(function, [&] {
        auto& core = core_of(a, "allreduce", function);
        core.start();
        core.wait();
    });
}

int pmr_allreduce_destroy(pmr_allreduce* a) {
    return destroy("pmr_allreduce_destroy", a);
}

int pmr_barrier_create(pmr_communicator c, pmr_barrier* result) {
    constexpr const char* function = "pmr_barrier_create";
    return guarded(function, [&] {
        pmr_barrier& handle = out(result, "result", function);
        handle = nullptr;
        handle =
            new pmr_barrier_s{pmr::detail::CollectiveCore::barrier(communicator_of(c, function))};
    });
}

int pmr_barrier_start(pmr_barrier b) {
    constexpr const char* function = "pmr_barrier_start";
    return guarded(function, [&] { core_of(b, "barrier", function).start(); });
}

int pmr_barrier_wait(pmr_barrier b) {
    constexpr const char* function = "pmr_barrier_wait";
    return guarded(function, [&] { core_of(b, "barrier", function).wait(); });
}

int pmr_barrier_test(pmr_barrier b, int* done) {
    constexpr const char* function = "pmr_barrier_test";
    return guarded(function, [&] {
        int& flag = out(done, "done", function);
        flag = 0;
        flag = core_of(b, "barrier", function).test() ? 1 : 0;
    });
}

int pmr_barrier_run(pmr_barrier b) {
    constexpr const char* function = "pmr_barrier_run";
    return guarded(function, [&] {
        auto& core = core_of(b, "barrier", function);
        core.start();
        core.wait();
    });
}

int pmr_barrier_destroy(pmr_barrier* b) {
    return destroy("pmr_barrier_destroy", b);
}

// ---- Neighbour exchange ----------------------------------------------------------------------

void pmr_neighbor_options_init(pmr_neighbor_options* options) {
    if (options == nullptr) {
        return;
    }
    const pmr::NeighborOptions defaults;
    options->algorithm = PMR_NEIGHBOR_AUTOMATIC;
    options->crossover_bytes = defaults.crossover_bytes;
    options->min_fragment_bytes = defaults.min_fragment_bytes;
    options->calibrate = defaults.calibrate ? 1 : 0;
    options->tag_offset = defaults.tag_offset;
}

} // extern "C"

namespace {

pmr::NeighborOptions neighbor_options(const pmr_neighbor_options* options, const char* function) {
    pmr::NeighborOptions result;
    if (options == nullptr) {
        return result;
    }
    constexpr pmr::NeighborAlgorithm algorithms[] = {pmr::NeighborAlgorithm::automatic,
                                                     pmr::NeighborAlgorithm::direct,
                                                     pmr::NeighborAlgorithm::split};
    result.algorithm = algorithms[enumerator<int>(options->algorithm, 2, "algorithm", function)];
    result.crossover_bytes = options->crossover_bytes;
    result.min_fragment_bytes = options->min_fragment_bytes;
    result.calibrate = options->calibrate != 0;
    result.tag_offset = options->tag_offset;
    return result;
}

/// The buffer lists of a create call: both NULL (library-owned) or `count` entries each.
void neighbor_buffers(void* const* send, void* const* recv, std::size_t count, const char* function,
                      std::vector<void*>& send_list, std::vector<void*>& recv_list) {
    if ((send == nullptr) != (recv == nullptr)) {
        pmr::detail::raise<pmr::ArgumentError>(
            "one of the buffer arrays `send` and `recv` is NULL and the other is not", function,
            "Pass both (user buffers) or neither (library-owned buffers).");
    }
    if (send != nullptr) {
        send_list.assign(send, send + count);
        recv_list.assign(recv, recv + count);
    }
}

pmr::detail::NeighborCore& exchange_of(pmr_neighbor_exchange x, const char* function) {
    return deref(x, "neighbor_exchange", function).core;
}

} // namespace

extern "C" {

int pmr_neighbor_exchange_create_cart(pmr_communicator c, const size_t* counts, size_t element_size,
                                      void* const* send, void* const* recv,
                                      const pmr_neighbor_options* options,
                                      pmr_neighbor_exchange* result) {
    constexpr const char* function = "pmr_neighbor_exchange_create_cart";
    return guarded(function, [&] {
        pmr_neighbor_exchange& handle = out(result, "result", function);
        handle = nullptr;
        const pmr::Communicator& comm = communicator_of(c, function);
        const pmr::NeighborOptions o = neighbor_options(options, function);
        if (counts == nullptr) {
            pmr::detail::raise<pmr::ArgumentError>(
                "the counts array is NULL", function,
                "Pass 2 * ndims counts: neighbour 2*d is direction -1, 2*d+1 is +1.");
        }
        if (comm.dimensions() == 0) {
            pmr::detail::raise<pmr::UsageError>(
                "the communicator has no Cartesian grid", function,
                "Create it with pmr_communicator_create(comm, ndims, dims, periods, ...), or use "
                "pmr_neighbor_exchange_create with a neighbour list.");
        }
        const std::size_t n = 2 * static_cast<std::size_t>(comm.dimensions());
        const std::vector<std::size_t> count_list(counts, counts + n);
        std::vector<void*> send_list;
        std::vector<void*> recv_list;
        neighbor_buffers(send, recv, n, function, send_list, recv_list);
        handle = new pmr_neighbor_exchange_s{pmr::detail::NeighborCore(
            comm, pmr::detail::cartesian_neighbors(comm, count_list, o.tag_offset), element_size,
            send_list, recv_list, o)};
    });
}

int pmr_neighbor_exchange_create(pmr_communicator c, const pmr_neighbor* neighbors, size_t count,
                                 size_t element_size, void* const* send, void* const* recv,
                                 const pmr_neighbor_options* options,
                                 pmr_neighbor_exchange* result) {
    constexpr const char* function = "pmr_neighbor_exchange_create";
    return guarded(function, [&] {
        pmr_neighbor_exchange& handle = out(result, "result", function);
        handle = nullptr;
        const pmr::Communicator& comm = communicator_of(c, function);
        const pmr::NeighborOptions o = neighbor_options(options, function);
        if (neighbors == nullptr && count > 0) {
            pmr::detail::raise<pmr::ArgumentError>("the neighbour array is NULL", function,
                                                   "Pass `count` pmr_neighbor entries.");
        }
        std::vector<pmr::Neighbor> list;
        for (std::size_t i = 0; i < count; ++i) {
            const pmr_neighbor& n = neighbors[i];
            list.push_back({n.rank, n.send_count, n.recv_count, n.send_tag, n.recv_tag});
        }
        std::vector<void*> send_list;
        std::vector<void*> recv_list;
        neighbor_buffers(send, recv, count, function, send_list, recv_list);
        handle = new pmr_neighbor_exchange_s{
            pmr::detail::NeighborCore(comm, list, element_size, send_list, recv_list, o)};
    });
}

int pmr_neighbor_exchange_size(pmr_neighbor_exchange x, size_t* size) {
    constexpr const char* function = "pmr_neighbor_exchange_size";
    return guarded(function, [&] {
        size_t& result = out(size, "size", function);
        result = exchange_of(x, function).size();
    });
}

void* pmr_neighbor_exchange_send_data(pmr_neighbor_exchange x, size_t i) {
    constexpr const char* function = "pmr_neighbor_exchange_send_data";
    void* data = nullptr;
    guarded(function, [&] { data = exchange_of(x, function).send_data(i); });
    return data;
}

void* pmr_neighbor_exchange_recv_data(pmr_neighbor_exchange x, size_t i) {
    constexpr const char* function = "pmr_neighbor_exchange_recv_data";
    void* data = nullptr;
    guarded(function, [&] { data = exchange_of(x, function).recv_data(i); });
    return data;
}

int pmr_neighbor_exchange_neighbor_rank(pmr_neighbor_exchange x, size_t i, int* rank) {
    constexpr const char* function = "pmr_neighbor_exchange_neighbor_rank";
    return guarded(function, [&] {
        int& result = out(rank, "rank", function);
        result = exchange_of(x, function).neighbor(i).rank;
    });
}

int pmr_neighbor_exchange_message(pmr_neighbor_exchange x, size_t i, int* algorithm,
                                  size_t* fragments) {
    constexpr const char* function = "pmr_neighbor_exchange_message";
    return guarded(function, [&] {
        const pmr::detail::NeighborCore& core = exchange_of(x, function);
        const std::size_t f = core.fragments(i);
        if (algorithm != nullptr) {
            *algorithm = f > 1 ? PMR_NEIGHBOR_SPLIT : PMR_NEIGHBOR_DIRECT;
        }
        if (fragments != nullptr) {
            *fragments = f;
        }
    });
}

int pmr_neighbor_exchange_rails(pmr_neighbor_exchange x, size_t* rails) {
    constexpr const char* function = "pmr_neighbor_exchange_rails";
    return guarded(function, [&] {
        size_t& result = out(rails, "rails", function);
        result = exchange_of(x, function).rails();
    });
}

int pmr_neighbor_exchange_start(pmr_neighbor_exchange x) {
    constexpr const char* function = "pmr_neighbor_exchange_start";
    return guarded(function, [&] { exchange_of(x, function).start(); });
}

int pmr_neighbor_exchange_wait(pmr_neighbor_exchange x) {
    constexpr const char* function = "pmr_neighbor_exchange_wait";
    return guarded(function, [&] { exchange_of(x, function).wait(); });
}

int pmr_neighbor_exchange_test(pmr_neighbor_exchange x, int* done) {
    constexpr const char* function = "pmr_neighbor_exchange_test";
    return guarded(function, [&] {
        int& flag = out(done, "done", function);
        flag = 0;
        flag = exchange_of(x, function).test() ? 1 : 0;
    });
}

int pmr_neighbor_exchange_run(pmr_neighbor_exchange x) {
    constexpr const char* function = "pmr_neighbor_exchange_run";
    return guarded(function, [&] {
        auto& core = exchange_of(x, function);
        core.start();
        core.wait();
    });
}

int pmr_neighbor_exchange_destroy(pmr_neighbor_exchange* x) {
    return destroy("pmr_neighbor_exchange_destroy", x);
}

} // extern "C"
