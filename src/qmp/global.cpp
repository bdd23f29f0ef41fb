// SPDX-License-Identifier: MIT
// QMP on pmr: global operations on pmr's persistent collectives.
//
// Each kind of operation and size gets one persistent collective per communicator, made at its
// first use (every node calls the global operations in the same order, so every node makes the
// same objects in the same order) and run again at every later call: sums, maxima and minima on
// pmr::Allreduce, broadcasts on pmr::Broadcast, barriers on pmr::Barrier. Operations pmr has no
// reduction for (xor, long double sums, extended sums, user functions) gather every node's value
// with pmr::Allgather and fold them in node order on every node. Either way every node gets
// bitwise the same result, and the same inputs give the same result in every run.
//
// Sums on two nodes, the global sum of a solver's every iteration, skip the collective: each node
// sends its operands to the other on a connection kept for them (one pair of windows per element
// type and count) and adds x_0 + x_1 in node order, so both get bitwise the same result, the one
// pmr's recursive doubling gives there. What the engine of a collective does per run for any plan
// (steps, staging copies, grants of the next run) costs more instructions than the exchange.
#include "internal.hpp"

#include <pmr/collectives.hpp>
#include <pmr/target.hpp>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

namespace qmp {
namespace {

enum class Kind : int {
    sum,
    max,
    min,
    gather,
    broadcast,
    barrier,
};

/// More cached collectives than this on one communicator (a code summing arrays of ever new
/// lengths) are all dropped and made again as needed: every node drops them at the same call.
constexpr std::size_t cache_limit = 64;

/// Element types of the cached collectives, told apart in their keys.
template <class T>
constexpr int type_code() noexcept {
    return static_cast<int>(sizeof(T)) * 4 + (std::is_floating_point_v<T> ? 1 : 0) +
           (std::is_signed_v<T> ? 2 : 0);
}

template <class C, class Make>
C& cached(QMP_comm_t comm, Kind kind, int type, std::size_t count, Make&& make) {
    const CollectiveKey key{static_cast<int>(kind), type, count};
    // A solver calls the same operation again and again: skip the lookup then.
    if (comm->last_collective != nullptr && comm->last_key == key) {
        return static_cast<C&>(*comm->last_collective);
    }
    auto it = comm->collectives.find(key);
    if (it == comm->collectives.end()) {
        if (comm->collectives.size() >= cache_limit) {
            comm->last_collective = nullptr;
            comm->collectives.clear();
        }
        it = comm->collectives.emplace(key, std::make_unique<C>(make())).first;
    }
    comm->last_key = key;
    comm->last_collective = it->second.get();
    return static_cast<C&>(*it->second);
}

/// Runs a collective, completing the node's message handles meanwhile (see progress_all()).
void run(pmr::Collective& c) {
    c.start();
    if (state().active.empty()) {
        c.wait(); // nothing else to complete meanwhile: pmr's own wait
        return;
    }
    unsigned rounds = 0;
    while (!c.test()) {
        progress_all();
        relax(rounds);
    }
}

/// Sums of up to this many bytes on two nodes take one exchange of the whole vector (as pmr's
/// recursive doubling does there); larger ones go to pmr::Allreduce, which splits them into
/// halves on one node.
constexpr std::size_t pair_max_bytes = std::size_t{8} * 1024;
/// The tag of the pair connection: above every tag of message handles (messages.cpp).
constexpr int pair_tag = 1500;

/// The exchange of `count` elements of type `type` with the other node of `comm` (two nodes):
/// made at the first sum of that kind, on every node at the same call.
PairExchange& exchange_of(QMP_comm_t comm, int type, std::size_t count, std::size_t bytes) {
    const CollectiveKey key{static_cast<int>(Kind::sum), type, count};
    if (comm->last_exchange != nullptr && comm->last_exchange_key == key) {
        return *comm->last_exchange;
    }
    auto it = comm->exchanges.find(key);
    if (it == comm->exchanges.end()) {
        if (comm->exchanges.size() >= cache_limit) {
            comm->last_exchange = nullptr;
            comm->exchanges.clear();
        }
        if (!comm->pair) {
            comm->pair =
                pmr::Connection(pmr::Target(*comm->pmr, 1 - comm->rank, pair_tag, pair_tag));
        }
        PairExchange made;
        made.send = pmr::SendWindow<std::byte>(comm->pair, bytes);
        made.recv = pmr::RecvWindow<std::byte>(comm->pair, bytes);
        it = comm->exchanges.emplace(key, std::move(made)).first;
    }
    comm->last_exchange_key = key;
    comm->last_exchange = &it->second;
    return it->second;
}

template <class T>
T add(T a, T b) noexcept {
    if constexpr (std::is_integral_v<T>) {
        using U = std::make_unsigned_t<T>;
        return static_cast<T>(static_cast<U>(a) + static_cast<U>(b)); // wraps, as pmr's sums do
    } else {
        return a + b;
    }
}

/// The global sum of `count` elements on a communicator of two nodes.
template <class T>
void pair_sum(QMP_comm_t comm, T* values, std::size_t count) {
    const std::size_t bytes = count * sizeof(T);
    PairExchange& e = exchange_of(comm, type_code<T>(), count, bytes);
    std::memcpy(e.send.data(), values, bytes);
    if (!e.granted) {
        e.recv.init();
    }
    e.granted = false;
    e.send.init();
    e.send.post();
    e.recv.post();
    // The other node's operands have usually arrived by now: one test each, then a wait.
    const bool sent = e.send.test();
    const bool received = e.recv.test();
    if (sent && received) {
        // done
    } else if (state().active.empty()) { // nothing else to complete meanwhile: pmr's own wait
        if (!sent && !received) {
            pmr::wait_all(e.send, e.recv);
        } else if (!sent) {
            e.send.wait();
        } else {
            e.recv.wait();
        }
    } else {
        bool sent_now = sent;
        bool received_now = received;
        unsigned rounds = 0;
        while (!sent_now || !received_now) {
            progress_all();
            relax(rounds);
            sent_now = sent_now || e.send.test();
            received_now = received_now || e.recv.test();
        }
    }
    // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast): the window holds T values
    const T* theirs = reinterpret_cast<const T*>(e.recv.data());
    if (comm->rank == 0) {
        for (std::size_t i = 0; i < count; ++i) {
            values[i] = add(values[i], theirs[i]);
        }
    } else {
        for (std::size_t i = 0; i < count; ++i) {
            values[i] = add(theirs[i], values[i]);
        }
    }
    // Granted now, so that the other node's next send finds the window ready.
    e.recv.init();
    e.granted = true;
}

template <class T>
pmr::ReduceOp op_of(Kind kind) {
    return kind == Kind::sum ? pmr::ReduceOp::sum
                             : (kind == Kind::max ? pmr::ReduceOp::max : pmr::ReduceOp::min);
}

template <class T>
QMP_status_t reduce(const char* call, QMP_comm_t comm, T* values, int length, Kind kind) {
    return guarded(call, [&] {
        comm = resolve(comm);
        if (length < 0 || (values == nullptr && length > 0)) {
            throw Failure{QMP_INVALID_ARG, values == nullptr ? "null value" : "negative length"};
        }
        if (length == 0) {
            return;
        }
        const auto count = static_cast<std::size_t>(length);
        if (kind == Kind::sum && comm->size == 2 && count * sizeof(T) <= pair_max_bytes) {
            pair_sum(comm, values, count);
            return;
        }
        auto& c = cached<pmr::Allreduce<T>>(comm, kind, type_code<T>(), count, [&] {
            return pmr::Allreduce<T>(*comm->pmr, count, op_of<T>(kind));
        });
        std::memcpy(c.data(), values, count * sizeof(T));
        run(c);
        std::memcpy(values, c.data(), count * sizeof(T));
    });
}

/// Gathers `count` elements of every node (in node order) and returns the gathered array.
template <class T>
const T* gather(QMP_comm_t comm, const T* values, std::size_t count) {
    auto& c = cached<pmr::Allgather<T>>(comm, Kind::gather, type_code<T>(), count,
                                        [&] { return pmr::Allgather<T>(*comm->pmr, count); });
    std::memcpy(c.input(), values, count * sizeof(T));
    run(c);
    return c.data();
}

template <class T>
void check_values(const T* values, int length) {
    if (length < 0 || (values == nullptr && length > 0)) {
        throw Failure{QMP_INVALID_ARG, values == nullptr ? "null value" : "negative length"};
    }
}

} // namespace
} // namespace qmp

using qmp::Failure;
using qmp::guarded;
using qmp::Kind;

static_assert(sizeof(int) == sizeof(std::int32_t), "QMP_sum_int sums 32-bit integers");

extern "C" {

QMP_status_t QMP_comm_barrier(QMP_comm_t comm) {
    return guarded("QMP_barrier", [&] {
        comm = qmp::resolve(comm);
        auto& c = qmp::cached<pmr::Barrier>(comm, Kind::barrier, 0, 0,
                                            [&] { return pmr::Barrier(*comm->pmr); });
        qmp::run(c);
    });
}
QMP_status_t QMP_barrier(void) {
    return QMP_comm_barrier(nullptr);
}

QMP_status_t QMP_comm_broadcast(QMP_comm_t comm, void* buffer, size_t nbytes) {
    return guarded("QMP_broadcast", [&] {
        comm = qmp::resolve(comm);
        if (buffer == nullptr && nbytes > 0) {
            throw Failure{QMP_INVALID_ARG, "null buffer"};
        }
        if (nbytes == 0) {
            return;
        }
        auto& c = qmp::cached<pmr::Broadcast<std::byte>>(comm, Kind::broadcast, 0, nbytes, [&] {
            return pmr::Broadcast<std::byte>(*comm->pmr, nbytes, 0);
        });
        if (comm->rank == 0) {
            std::memcpy(c.data(), buffer, nbytes);
        }
        qmp::run(c);
        if (comm->rank != 0) {
            std::memcpy(buffer, c.data(), nbytes);
        }
    });
}
QMP_status_t QMP_broadcast(void* buffer, size_t nbytes) {
    return QMP_comm_broadcast(nullptr, buffer, nbytes);
}

QMP_status_t QMP_comm_sum_int(QMP_comm_t comm, int* value) {
    return qmp::reduce("QMP_sum_int", comm, reinterpret_cast<std::int32_t*>(value), 1, Kind::sum);
}
QMP_status_t QMP_sum_int(int* value) {
    return QMP_comm_sum_int(nullptr, value);
}

QMP_status_t QMP_comm_sum_float(QMP_comm_t comm, float* value) {
    return qmp::reduce("QMP_sum_float", comm, value, 1, Kind::sum);
}
QMP_status_t QMP_sum_float(float* value) {
    return QMP_comm_sum_float(nullptr, value);
}

QMP_status_t QMP_comm_sum_double(QMP_comm_t comm, double* value) {
    return qmp::reduce("QMP_sum_double", comm, value, 1, Kind::sum);
}
QMP_status_t QMP_sum_double(double* value) {
    return QMP_comm_sum_double(nullptr, value);
}

QMP_status_t QMP_comm_sum_float_array(QMP_comm_t comm, float value[], int length) {
    return qmp::reduce("QMP_sum_float_array", comm, value, length, Kind::sum);
}
QMP_status_t QMP_sum_float_array(float value[], int length) {
    return QMP_comm_sum_float_array(nullptr, value, length);
}

QMP_status_t QMP_comm_sum_double_array(QMP_comm_t comm, double value[], int length) {
    return qmp::reduce("QMP_sum_double_array", comm, value, length, Kind::sum);
}
QMP_status_t QMP_sum_double_array(double value[], int length) {
    return QMP_comm_sum_double_array(nullptr, value, length);
}

QMP_status_t QMP_comm_max_float(QMP_comm_t comm, float* value) {
    return qmp::reduce("QMP_max_float", comm, value, 1, Kind::max);
}
QMP_status_t QMP_max_float(float* value) {
    return QMP_comm_max_float(nullptr, value);
}
QMP_status_t QMP_comm_max_double(QMP_comm_t comm, double* value) {
    return qmp::reduce("QMP_max_double", comm, value, 1, Kind::max);
}
QMP_status_t QMP_max_double(double* value) {
    return QMP_comm_max_double(nullptr, value);
}
QMP_status_t QMP_comm_min_float(QMP_comm_t comm, float* value) {
    return qmp::reduce("QMP_min_float", comm, value, 1, Kind::min);
}
QMP_status_t QMP_min_float(float* value) {
    return QMP_comm_min_float(nullptr, value);
}
QMP_status_t QMP_comm_min_double(QMP_comm_t comm, double* value) {
    return qmp::reduce("QMP_min_double", comm, value, 1, Kind::min);
}
QMP_status_t QMP_min_double(double* value) {
    return QMP_comm_min_double(nullptr, value);
}

QMP_status_t QMP_comm_sum_long_double_array(QMP_comm_t comm, long double value[], int length) {
    return guarded("QMP_sum_long_double_array", [&] {
        comm = qmp::resolve(comm);
        qmp::check_values(value, length);
        if (length == 0) {
            return;
        }
        const auto count = static_cast<std::size_t>(length);
        const long double* all = qmp::gather(comm, value, count);
        for (std::size_t i = 0; i < count; ++i) {
            long double sum = 0.0L;
            for (int node = 0; node < comm->size; ++node) {
                sum += all[static_cast<std::size_t>(node) * count + i];
            }
            value[i] = sum;
        }
    });
}
QMP_status_t QMP_sum_long_double_array(long double value[], int length) {
    return QMP_comm_sum_long_double_array(nullptr, value, length);
}
QMP_status_t QMP_comm_sum_long_double(QMP_comm_t comm, long double* value) {
    return QMP_comm_sum_long_double_array(comm, value, 1);
}
QMP_status_t QMP_sum_long_double(long double* value) {
    return QMP_comm_sum_long_double_array(nullptr, value, 1);
}

QMP_status_t QMP_comm_sum_double_extended(QMP_comm_t comm, double* value) {
    return guarded("QMP_sum_double_extended", [&] {
        comm = qmp::resolve(comm);
        qmp::check_values(value, 1);
        const double* all = qmp::gather(comm, value, 1);
        long double sum = 0.0L;
        for (int node = 0; node < comm->size; ++node) {
            sum += all[node];
        }
        *value = static_cast<double>(sum);
    });
}
QMP_status_t QMP_sum_double_extended(double* value) {
    return QMP_comm_sum_double_extended(nullptr, value);
}

QMP_status_t QMP_comm_xor_ulong(QMP_comm_t comm, unsigned long* value) {
    return guarded("QMP_xor_ulong", [&] {
        comm = qmp::resolve(comm);
        qmp::check_values(value, 1);
        const unsigned long* all = qmp::gather(comm, value, 1);
        unsigned long x = 0;
        for (int node = 0; node < comm->size; ++node) {
            x ^= all[node];
        }
        *value = x;
    });
}
QMP_status_t QMP_xor_ulong(unsigned long* value) {
    return QMP_comm_xor_ulong(nullptr, value);
}

QMP_status_t QMP_comm_binary_reduction(QMP_comm_t comm, void* lbuffer, size_t buflen,
                                       QMP_binary_func bfunc) {
    return guarded("QMP_binary_reduction", [&] {
        comm = qmp::resolve(comm);
        if (bfunc == nullptr || (lbuffer == nullptr && buflen > 0)) {
            throw Failure{QMP_INVALID_ARG, bfunc == nullptr ? "null function" : "null buffer"};
        }
        if (buflen == 0) {
            return;
        }
        auto* bytes = static_cast<std::byte*>(lbuffer);
        const std::byte* all = qmp::gather(comm, bytes, buflen);
        // Node 0's value first, then every other one combined into it in node order.
        std::memcpy(bytes, all, buflen);
        for (int node = 1; node < comm->size; ++node) {
            // NOLINTNEXTLINE(cppcoreguidelines-pro-type-const-cast): QMP's function type
            bfunc(bytes, const_cast<std::byte*>(all + static_cast<std::size_t>(node) * buflen));
        }
    });
}
QMP_status_t QMP_binary_reduction(void* lbuffer, size_t buflen, QMP_binary_func bfunc) {
    return QMP_comm_binary_reduction(nullptr, lbuffer, buflen, bfunc);
}

} // extern "C"
