// SPDX-License-Identifier: MIT
// The public collectives: argument checks across ranks, the choice of algorithm and order, the
// buffers, and the reductions; the data moves in engine.cpp along the plans of schedules.cpp.
#include "collectives/engine.hpp"
#include "collectives/schedules.hpp"

#include "base/environment.hpp"
#include "base/error.hpp"
#include "base/names.hpp"
#include "base/node.hpp"

#include <pmr/connection.hpp>

#include <pmr/collectives.hpp>
#include <pmr/memory.hpp>
#include <pmr/provider.hpp>
#include <pmr/settings.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <complex>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace pmr {

namespace {

constexpr detail::Named<ReduceOp> reduce_op_names[] = {
    {ReduceOp::sum, "sum"}, {ReduceOp::max, "max"}, {ReduceOp::min, "min"}};

/// Also the values of PMR_ALLREDUCE_ALGORITHM.
constexpr detail::Named<AllreduceAlgorithm> allreduce_algorithm_names[] = {
    {AllreduceAlgorithm::automatic, "automatic"},
    {AllreduceAlgorithm::recursive_doubling, "recursive_doubling"},
    {AllreduceAlgorithm::ring, "ring"},
    {AllreduceAlgorithm::trinaryx3, "trinaryx3"},
    {AllreduceAlgorithm::direct, "direct"}};

} // namespace

std::string_view to_string(ReduceOp op) noexcept {
    return detail::name_of(op, reduce_op_names, "?");
}

std::string_view to_string(AllreduceAlgorithm algorithm) noexcept {
    return detail::name_of(algorithm, allreduce_algorithm_names, "?");
}

std::string_view to_string(ReductionOrder order) noexcept {
    return order == ReductionOrder::rank ? "rank" : "algorithm";
}

namespace detail {

namespace {

/// Vectors up to this many bytes (times the rank count for the rank order) take recursive
/// doubling, larger ones the ring.
constexpr std::size_t ring_threshold_bytes = std::size_t{64} * 1024;
/// The direct allreduce is chosen automatically on one node up to this many ranks (each rank
/// keeps two windows per peer)...
constexpr int direct_max_ranks = 16;
/// ... and sends vectors of up to this many bytes whole to every rank (one step), larger ones
/// as p chunks (two steps).
constexpr std::size_t direct_whole_bytes = std::size_t{8} * 1024;
/// The automatic allreduce takes Trinaryx3 from this size on a 3D grid with three rails per
/// connection (emulated K computer, 8 ranks on 2 cores, time scale 20: it loses to recursive
/// doubling at 64 KiB and wins from 256 KiB; at scale 200, network-bound, it wins at every size).
constexpr std::size_t trinaryx3_min_bytes = std::size_t{128} * 1024;
/// Allgathers of up to this many bytes in all take recursive doubling.
constexpr std::size_t allgather_ring_threshold_bytes = std::size_t{256} * 1024;

// ---- Reductions ---------------------------------------------------------------------------------

template <class T>
T sum(T a, T b) noexcept {
    if constexpr (std::is_integral_v<T>) {
        using U = std::make_unsigned_t<T>;
        return static_cast<T>(static_cast<U>(a) + static_cast<U>(b)); // wraps, as documented
    } else {
        return a + b;
    }
}

// max and min of floating-point values as IEEE 754-2019 maximum and minimum: a NaN wins (the
// result is NaN if any rank has one), +0 is above -0. Plain comparisons would return one operand
// or the other depending on the order of the operands, which differs between algorithms and, in
// the algorithm order, between ranks: every rank must get the same result.
template <class T, ReduceOp Op>
T extreme(T lower, T upper) noexcept {
    constexpr bool is_max = Op == ReduceOp::max;
    if constexpr (std::is_floating_point_v<T>) {
        if (std::isnan(lower)) {
            return lower;
        }
        if (std::isnan(upper)) {
            return upper;
        }
        if (lower == upper) { // equal values, or +0 and -0
            return std::signbit(lower) == is_max ? upper : lower;
        }
    }
    if constexpr (is_max) {
        return upper > lower ? upper : lower;
    } else {
        return upper < lower ? upper : lower;
    }
}

template <class T, ReduceOp Op>
T combine(T lower, T upper) noexcept {
    if constexpr (Op == ReduceOp::sum) {
        return sum(lower, upper);
    } else {
        return extreme<T, Op>(lower, upper);
    }
}

template <class T, ReduceOp Op>
void reduce(void* acc_bytes, const void* in_bytes, std::size_t count, bool in_is_lower) {
    auto* acc = static_cast<T*>(acc_bytes);
    const auto* in = static_cast<const T*>(in_bytes);
    if (in_is_lower) {
        for (std::size_t i = 0; i < count; ++i) {
            acc[i] = combine<T, Op>(in[i], acc[i]);
        }
    } else {
        for (std::size_t i = 0; i < count; ++i) {
            acc[i] = combine<T, Op>(acc[i], in[i]);
        }
    }
}

template <class T>
coll::Reducer reducer_of(ReduceOp op) noexcept {
    if constexpr (std::is_arithmetic_v<T>) {
        switch (op) {
        case ReduceOp::sum:
            return &reduce<T, ReduceOp::sum>;
        case ReduceOp::max:
            return &reduce<T, ReduceOp::max>;
        case ReduceOp::min:
            return &reduce<T, ReduceOp::min>;
        }
        return nullptr;
    } else {
        return op == ReduceOp::sum ? &reduce<T, ReduceOp::sum> : nullptr;
    }
}

struct Element {
    std::size_t size;
    const char* name;
    coll::Reducer (*reducer)(ReduceOp);
};

Element element_of(ElementKind kind) {
    switch (kind) {
    case ElementKind::f32:
        return {sizeof(float), "float", &reducer_of<float>};
    case ElementKind::f64:
        return {sizeof(double), "double", &reducer_of<double>};
    case ElementKind::i32:
        return {sizeof(std::int32_t), "int32_t", &reducer_of<std::int32_t>};
    case ElementKind::i64:
        return {sizeof(std::int64_t), "int64_t", &reducer_of<std::int64_t>};
    case ElementKind::c32:
        return {sizeof(std::complex<float>), "complex<float>", &reducer_of<std::complex<float>>};
    case ElementKind::c64:
        return {sizeof(std::complex<double>), "complex<double>", &reducer_of<std::complex<double>>};
    case ElementKind::bytes:
        break;
    }
    return {1, "bytes", nullptr};
}

// ---- Agreement between ranks --------------------------------------------------------------------

enum class Kind : std::int64_t { allreduce = 1, barrier, broadcast, allgather };

/// What every rank must agree on; `problem` is set where this rank found its own arguments bad
/// (a bad environment value), so that every rank learns of it instead of waiting for this one.
struct Descriptor {
    static constexpr int fields = 8;
    std::array<std::int64_t, fields> values{};
    static constexpr std::array<const char*, fields> names = {
        "collective", "element type", "count", "operation",
        "algorithm",  "order",        "root",  "a valid PMR_ALLREDUCE_* setting"};
};

/// Exchanges the descriptors of all ranks with an allgather on pmr windows of the same size on
/// every rank (so it pairs whatever the arguments are) and throws ArgumentError on every rank if
/// they differ.
/// Every rank's `mine` (the same number of values on every rank), rank by rank: an allgather on
/// pmr windows at set-up.
std::vector<std::int64_t> gather_values(const Communicator& comm, coll::Connections& connections,
                                        const std::int64_t* mine, std::size_t fields,
                                        const std::string& what) {
    const std::size_t bytes = fields * sizeof(std::int64_t);
    std::vector<std::int64_t> all(static_cast<std::size_t>(comm.size()) * fields);
    std::memcpy(all.data() + static_cast<std::size_t>(comm.rank()) * fields, mine, bytes);
    // One run, waited for here: it completes the set-up of the windows as a warm-up run would.
    coll::Engine exchange(comm, connections,
                          coll::recursive_doubling_allgather(comm.size(), comm.rank(), 1, bytes),
                          bytes, nullptr, what, nullptr, coll::WarmUp::no);
    exchange.set_work(reinterpret_cast<std::byte*>(all.data()));
    exchange.start();
    exchange.wait();
    return all;
}

/// This rank's node for Agreement::share_memory, or 0 where a forced network provider keeps the
/// algorithms for networks.
std::int64_t memory_key() {
    const auto& forced = settings().provider;
    const bool shm = !forced || provider_from_string(*forced) == Provider::shm;
    return shm ? static_cast<std::int64_t>(node_key() >> 1) + 1 : 0;
}

/// What the agreement learnt besides that the arguments match.
struct Agreement {
    /// Every rank of the communicator is on this node and shm connects them.
    bool share_memory = false;
};

/// Checks on every rank that all ranks passed the same arguments (ArgumentError on every rank
/// otherwise, naming the first difference), in one allgather that also carries each rank's
/// memory_key(): the set-up of a collective costs one exchange of windows, not one per question.
Agreement agree(const Communicator& comm, coll::Connections& connections, const Descriptor& mine,
                const std::string& where, const std::string& own_problem) {
    const int size = comm.size();
    constexpr std::size_t width = Descriptor::fields + 1; // the descriptor, then the memory key
    std::array<std::int64_t, width> values{};
    std::copy(mine.values.begin(), mine.values.end(), values.begin());
    values[Descriptor::fields] = memory_key();
    const std::vector<std::int64_t> all = gather_values(comm, connections, values.data(), width,
                                                        where + " (agreement on the arguments)");
    if (!own_problem.empty()) {
        raise<ArgumentError>(own_problem, where);
    }
    Agreement agreement;
    agreement.share_memory = all[Descriptor::fields] != 0;
    for (int rank = 0; rank < size; ++rank) {
        const std::int64_t* theirs = all.data() + static_cast<std::size_t>(rank) * width;
        agreement.share_memory =
            agreement.share_memory && theirs[Descriptor::fields] == all[Descriptor::fields];
        if (theirs[Descriptor::fields - 1] != 0) {
            raise<ArgumentError>("rank " + std::to_string(rank) +
                                     " has invalid arguments or PMR_ALLREDUCE_* settings",
                                 where, "See that rank's message.");
        }
        for (int field = 0; field + 1 < Descriptor::fields; ++field) {
            const auto f = static_cast<std::size_t>(field);
            if (theirs[field] != all[f]) {
                raise<ArgumentError>(
                    "the ranks disagree on the " + std::string(Descriptor::names.at(f)) +
                        ": rank 0 has " + std::to_string(all[f]) + ", rank " +
                        std::to_string(rank) + " has " + std::to_string(theirs[field]),
                    where,
                    "Every rank must create the same collectives, in the same order, with the "
                    "same element type, count, operation, root and algorithm.");
            }
        }
    }
    return agreement;
}

struct OwnedMemory {
    void operator()(std::byte* pointer) const noexcept { pmr::deallocate_bytes(pointer); }
};
using Owned = std::unique_ptr<std::byte, OwnedMemory>;

Owned allocate_owned(std::size_t bytes) {
    // At least one byte, so that data() of an empty collective is not null.
    return Owned(static_cast<std::byte*>(pmr::allocate_bytes(std::max<std::size_t>(bytes, 1))));
}

std::size_t checked_product(std::size_t a, std::size_t b, const std::string& where) {
    if (a != 0 && b > std::numeric_limits<std::size_t>::max() / a) {
        raise<SizeError>("the buffer size overflows", where);
    }
    return a * b;
}

/// The finish callback of a rank-order reduce-scatter in which every other rank sends this rank
/// its contribution to each of `blocks` (element ranges of `result`): the receives arrive peer by
/// peer in rank order (this rank left out), block by block. It folds the contributions left to
/// right by rank into `result`, through a small buffer in `scratch`.
coll::Finish rank_order_fold(std::byte* result, std::vector<std::array<std::size_t, 2>> blocks,
                             std::size_t element_size, int size, int rank, coll::Reducer reducer,
                             std::vector<std::byte>& scratch) {
    constexpr std::size_t buffer_bytes = 4096;
    scratch.resize(buffer_bytes);
    std::byte* buffer = scratch.data();
    return [result, blocks = std::move(blocks), buffer, element_size, size, rank,
            reducer](const std::vector<const std::byte*>& received) {
        const std::size_t per_buffer = std::max<std::size_t>(buffer_bytes / element_size, 1);
        for (std::size_t b = 0; b < blocks.size(); ++b) {
            const std::size_t begin = blocks[b][0];
            const std::size_t end = blocks[b][1];
            auto contribution = [&](int j, std::size_t index) -> const std::byte* {
                if (j == rank) {
                    return result + index * element_size;
                }
                const auto peer = static_cast<std::size_t>(j < rank ? j : j - 1);
                return received[peer * blocks.size() + b] + (index - begin) * element_size;
            };
            for (std::size_t first = begin; first < end; first += per_buffer) {
                const std::size_t n = std::min(per_buffer, end - first);
                std::memcpy(buffer, contribution(0, first), n * element_size);
                for (int j = 1; j < size; ++j) {
                    reducer(buffer, contribution(j, first), n, false);
                }
                std::memcpy(result + first * element_size, buffer, n * element_size);
            }
        }
    };
}

/// Rails Trinaryx3 needs on every connection it sends on: one per part.
constexpr std::size_t trinaryx3_rails = 3;

/// The grid of a Trinaryx3 allreduce, after checking on every rank (so that every rank throws
/// alike) that the communicator is 3D Cartesian and that every connection of the plan has at
/// least three rails (lanes take distinct rails, by device name: see coll::Send::lane). Creates
/// those connections. Unless `required`, a communicator or connections that do not fit give no
/// grid instead of an exception (the same answer on every rank).
std::optional<coll::Grid3> trinaryx3_grid(const Communicator& comm, coll::Connections& connections,
                                          const std::string& where, bool required = true) {
    const char* choose = "Choose recursive_doubling, ring or automatic, or run on a provider with "
                         "rails (PMR_PROVIDER=tofu with PMR_TOFU_TNIS >= 3, or ucx with "
                         "PMR_RAILS >= 3) on a 3D pmr::Communicator.";
    if (comm.dimensions() != 3) {
        // The same on every rank: the communicator is.
        if (!required) {
            return std::nullopt;
        }
        raise<ArgumentError>("the trinaryx3 algorithm needs a 3D Cartesian communicator; this "
                             "one has " +
                                 std::to_string(comm.dimensions()) + " grid dimension(s)",
                             where, choose);
    }
    coll::Grid3 grid;
    for (std::size_t d = 0; d < 3; ++d) {
        grid.extents[d] = comm.size(static_cast<int>(d));
    }
    const std::array<std::int64_t, 3> mine = {comm.coordinate(0), comm.coordinate(1),
                                              comm.coordinate(2)};
    const std::vector<std::int64_t> all =
        gather_values(comm, connections, mine.data(), 3, where + " (grid coordinates)");
    const auto size = static_cast<std::size_t>(comm.size());
    grid.rank_at.assign(size, -1);
    grid.coords.resize(size);
    for (std::size_t r = 0; r < size; ++r) {
        for (std::size_t d = 0; d < 3; ++d) {
            grid.coords[r][d] = static_cast<int>(all[3 * r + d]);
        }
        grid.rank_at[grid.index_of(grid.coords[r])] = static_cast<int>(r);
    }
    // Rails of every connection that carries a part, checked before any data moves (3 x size
    // elements: no block of the plan is empty, so every peer shows).
    const auto steps = coll::trinaryx3_allreduce(grid, comm.rank(), 3 * size, 1);
    coll::connect_peers(comm, connections, steps);
    std::string problem;
    for (const coll::Step& step : steps) {
        for (const coll::Send& send : step.sends) {
            Connection& connection = connections.at(send.peer);
            const std::size_t rails = connection.rails();
            if (problem.empty() && rails < trinaryx3_rails) {
                problem = "the connection " + connection.describe() + " has " +
                          std::to_string(rails) + " rail(s)";
            }
        }
    }
    const std::int64_t bad = problem.empty() ? 0 : 1;
    const std::vector<std::int64_t> verdicts =
        gather_values(comm, connections, &bad, 1, where + " (rails of the grid)");
    for (std::size_t r = 0; r < size; ++r) {
        if (verdicts[r] != 0) {
            if (!required) {
                return std::nullopt;
            }
            raise<ArgumentError>(
                "the trinaryx3 algorithm needs connections with at least 3 rails to its grid "
                "neighbours; " +
                    (problem.empty()
                         ? "rank " + std::to_string(r) + " found fewer (see its message)"
                         : problem),
                where, choose);
        }
    }
    return grid;
}

/// The automatic choice of an allreduce, after the ranks agreed on the arguments: the same on
/// every rank, since it depends on the agreed count and order, the size and what the ranks
/// gather about their nodes.
AllreduceAlgorithm automatic_allreduce(const Communicator& comm, coll::Connections& connections,
                                       const Agreement& agreement, std::size_t bytes,
                                       std::size_t count, ReductionOrder order,
                                       const std::string& where, std::optional<coll::Grid3>& grid) {
    const int size = comm.size();
    if (size > 1 && size <= direct_max_ranks) {
        if (agreement.share_memory) {
            // Two ranks with a small vector: recursive doubling is the same one step and the
            // same order (x0 + x1), without the fold through a buffer.
            const bool whole = bytes <= direct_whole_bytes || count < 2;
            return size == 2 && whole ? AllreduceAlgorithm::recursive_doubling
                                      : AllreduceAlgorithm::direct;
        }
    }
    // A 3D grid whose connections all have three rails (tofu's TNIs, UCX rails): Trinaryx3 keeps
    // the three busy at once. Below trinaryx3_min_bytes its six steps cost more than they save.
    if (comm.dimensions() == 3 && bytes >= trinaryx3_min_bytes &&
        count >= 3 * static_cast<std::size_t>(size)) {
        grid = trinaryx3_grid(comm, connections, where, false);
        if (grid) {
            return AllreduceAlgorithm::trinaryx3;
        }
    }
    const std::size_t moved = order == ReductionOrder::rank
                                  ? checked_product(bytes, static_cast<std::size_t>(size), where)
                                  : bytes;
    const bool large = moved > ring_threshold_bytes && count >= static_cast<std::size_t>(size);
    return size > 2 && large ? AllreduceAlgorithm::ring : AllreduceAlgorithm::recursive_doubling;
}

} // namespace

struct CollectiveState {
    std::string what;
    /// Declared before the engines, whose windows hold them.
    coll::Connections connections;
    std::unique_ptr<coll::Engine> engine;
    AllreduceAlgorithm algorithm = AllreduceAlgorithm::automatic;
    ReductionOrder order = ReductionOrder::algorithm;
    Owned owned_result;
    Owned owned_input;
    std::vector<std::byte> scratch;
    std::byte* result = nullptr;
    std::byte* input = nullptr;
    /// Runs at start(), before the engine (copies the input into place).
    std::function<void()> before;
    /// Runs once the engine has completed (the rank-order fold).
    std::function<void()> after;
};

CollectiveCore::CollectiveCore() noexcept = default;
CollectiveCore::CollectiveCore(std::unique_ptr<CollectiveState> state) noexcept
    : state_(std::move(state)) {}
CollectiveCore::CollectiveCore(CollectiveCore&& other) noexcept = default;
CollectiveCore& CollectiveCore::operator=(CollectiveCore&& other) noexcept = default;
CollectiveCore::~CollectiveCore() = default;

CollectiveState& CollectiveCore::checked() const {
    if (!state_) {
        raise<UsageError>("use of an empty collective", "default-constructed or moved from",
                          "Assign a constructed collective first.");
    }
    return *state_;
}

namespace {

/// Runs f(); a Timeout or PeerLost from one of the windows is rethrown with the collective named,
/// since the window alone ("pmr-internal") does not say which collective the rank was in.
template <class F>
auto naming(const CollectiveState& s, F&& f) {
    try {
        return f();
    } catch (const Timeout& e) {
        throw Timeout(std::string(e.what()) + " While running: " + s.what + ".");
    } catch (const PeerLost& e) {
        throw PeerLost(std::string(e.what()) + " While running: " + s.what + ".");
    }
}

} // namespace

void CollectiveCore::start() {
    CollectiveState& s = checked();
    if (s.engine->active()) {
        raise<UsageError>("start() while the previous run is in flight", s.what,
                          "Complete each run with wait() (or test() returning true) first.");
    }
    if (s.before) {
        s.before();
    }
    naming(s, [&] { s.engine->start(); });
}

bool CollectiveCore::test() {
    CollectiveState& s = checked();
    if (!naming(s, [&] { return s.engine->test(); })) {
        return false;
    }
    if (s.after) {
        s.after();
    }
    return true;
}

void CollectiveCore::wait() {
    CollectiveState& s = checked();
    naming(s, [&] { s.engine->wait(); });
    if (s.after) {
        s.after();
    }
}

bool CollectiveCore::active() const noexcept {
    return state_ && state_->engine->active();
}

void* CollectiveCore::data() const noexcept {
    return state_ ? state_->result : nullptr;
}

void* CollectiveCore::input() const noexcept {
    return state_ ? state_->input : nullptr;
}

AllreduceAlgorithm CollectiveCore::algorithm() const noexcept {
    return state_ ? state_->algorithm : AllreduceAlgorithm::automatic;
}

ReductionOrder CollectiveCore::order() const noexcept {
    return state_ ? state_->order : ReductionOrder::algorithm;
}

std::string CollectiveCore::describe() const {
    return state_ ? state_->what : std::string("empty collective");
}

namespace {

std::string on_rank(const Communicator& comm) {
    return " on rank " + std::to_string(comm.rank()) + " of " + std::to_string(comm.size());
}

} // namespace

CollectiveCore CollectiveCore::allreduce(const Communicator& comm, ElementKind kind,
                                         std::size_t count, ReduceOp op, AllreduceOptions options,
                                         const void* in, void* out) {
    const Element element = element_of(kind);
    auto state = std::make_unique<CollectiveState>();
    std::string where = "allreduce of " + std::to_string(count) + " x " + element.name + " (" +
                        std::string(to_string(op)) + ")" + on_rank(comm);
    const std::size_t bytes = checked_product(count, element.size, where);
    const int size = comm.size();
    const int rank = comm.rank();

    // Settings of the environment where the options are left at their defaults.
    std::string problem;
    AllreduceAlgorithm algorithm = options.algorithm;
    ReductionOrder order = options.order;
    try {
        if (algorithm == AllreduceAlgorithm::automatic) {
            const std::string chosen = *settings::choice("PMR_ALLREDUCE_ALGORITHM");
            algorithm =
                value_of(chosen, allreduce_algorithm_names).value_or(AllreduceAlgorithm::automatic);
        }
        if (order == ReductionOrder::algorithm &&
            *settings::choice("PMR_ALLREDUCE_ORDER") == "rank") {
            order = ReductionOrder::rank;
        }
    } catch (const ArgumentError& e) {
        problem = e.what(); // reported on every rank after the agreement
        if (problem.rfind("pmr: ", 0) == 0) {
            problem.erase(0, 5);
        }
    }

    if (bytes > 0 && (in == nullptr) != (out == nullptr)) {
        problem = "one of the input and output buffers is null; pass both user buffers, or "
                  "neither for library-owned memory";
    }
    Descriptor descriptor;
    descriptor.values = {static_cast<std::int64_t>(Kind::allreduce),
                         static_cast<std::int64_t>(kind),
                         static_cast<std::int64_t>(count),
                         static_cast<std::int64_t>(op),
                         static_cast<std::int64_t>(algorithm),
                         static_cast<std::int64_t>(order),
                         -1,
                         problem.empty() ? 0 : 1};
    const Agreement agreement = agree(comm, state->connections, descriptor, where, problem);
    std::optional<coll::Grid3> grid;
    if (algorithm == AllreduceAlgorithm::automatic) {
        algorithm = automatic_allreduce(comm, state->connections, agreement, bytes, count, order,
                                        where, grid);
    }

    const coll::Reducer reducer = element.reducer(op);
    if (reducer == nullptr) {
        raise<ArgumentError>(std::string(to_string(op)) + " is not defined for " + element.name,
                             where, "Use sum for complex numbers, or reduce real parts.");
    }
    if (algorithm == AllreduceAlgorithm::trinaryx3 && !grid) {
        grid = trinaryx3_grid(comm, state->connections, where);
    }
    if (out == nullptr) {
        state->owned_result = allocate_owned(bytes);
        state->result = state->owned_result.get();
    } else {
        state->result = static_cast<std::byte*>(out);
    }
    const auto* input = static_cast<const std::byte*>(in);
    const bool separate_input = input != nullptr && input != state->result;

    where = "allreduce of " + std::to_string(count) + " x " + element.name + " (" +
            std::string(to_string(op)) + ", " + std::string(to_string(algorithm)) + ", order " +
            std::string(to_string(order)) + ")" + on_rank(comm);
    state->what = where;
    state->algorithm = algorithm;
    state->order = order;
    std::byte* result = state->result;
    const std::size_t element_size = element.size;

    std::vector<coll::Step> steps;
    coll::Finish finish;
    std::byte* work = result;
    std::byte* in_place = nullptr; // the buffer in-place windows lie over
    if (algorithm == AllreduceAlgorithm::direct) {
        // Rank order in either order: each chunk's owner (every rank, for a whole vector) folds
        // the contributions of all ranks left to right.
        const bool whole = bytes <= direct_whole_bytes || count < static_cast<std::size_t>(size);
        steps = coll::direct_allreduce(size, rank, count, element_size, whole);
        in_place = result;
        if (separate_input && bytes > 0) {
            state->before = [result, input, bytes] { std::memcpy(result, input, bytes); };
        }
        std::vector<std::array<std::size_t, 2>> blocks;
        const std::size_t begin = whole ? 0 : coll::chunk_begin(count, size, rank);
        const std::size_t end = whole ? count : coll::chunk_begin(count, size, rank + 1);
        if (end > begin) {
            blocks.push_back({begin, end});
        }
        finish = rank_order_fold(result, std::move(blocks), element_size, size, rank, reducer,
                                 state->scratch);
    } else if (order == ReductionOrder::algorithm) {
        if (grid) {
            steps = coll::trinaryx3_allreduce(*grid, rank, count, element_size);
        } else if (algorithm == AllreduceAlgorithm::ring) {
            steps = coll::ring_allreduce(size, rank, count, element_size);
        } else {
            steps = coll::recursive_doubling_allreduce(size, rank, count, element_size);
        }
        if (separate_input && bytes > 0) {
            state->before = [result, input, bytes] { std::memcpy(result, input, bytes); };
        }
    } else if (grid) {
        // Trinaryx3 by rank: each block's owner folds the blocks of all ranks left to right.
        steps = coll::trinaryx3_rank_order(*grid, rank, count, element_size);
        if (separate_input && bytes > 0) {
            state->before = [result, input, bytes] { std::memcpy(result, input, bytes); };
        }
        std::vector<std::array<std::size_t, 2>> blocks;
        for (int part = 0; part < 3; ++part) {
            const auto block = coll::trinaryx3_block(*grid, rank, part, count);
            if (block[1] > block[0]) {
                blocks.push_back(block);
            }
        }
        finish = rank_order_fold(result, std::move(blocks), element_size, size, rank, reducer,
                                 state->scratch);
    } else if (algorithm == AllreduceAlgorithm::recursive_doubling) {
        // Gather every contribution, then fold them left to right on every rank.
        steps = coll::recursive_doubling_allgather(size, rank, count, element_size);
        state->scratch.resize(checked_product(bytes, static_cast<std::size_t>(size), where));
        work = state->scratch.data();
        std::byte* own_slot = work + static_cast<std::size_t>(rank) * bytes;
        const std::byte* source = separate_input ? input : result;
        if (bytes > 0) {
            state->before = [own_slot, source, bytes] { std::memcpy(own_slot, source, bytes); };
        }
        state->after = [result, work, bytes, size, count, reducer] {
            if (bytes == 0) {
                return;
            }
            std::memcpy(result, work, bytes);
            for (int j = 1; j < size; ++j) {
                reducer(result, work + static_cast<std::size_t>(j) * bytes, count, false);
            }
        };
    } else {
        // Ring order by rank: each chunk's owner folds the chunks of all ranks left to right.
        steps = coll::direct_reduce_scatter_allgather(size, rank, count, element_size);
        if (separate_input && bytes > 0) {
            state->before = [result, input, bytes] { std::memcpy(result, input, bytes); };
        }
        const std::size_t begin = coll::chunk_begin(count, size, rank);
        const std::size_t end = coll::chunk_begin(count, size, rank + 1);
        std::vector<std::array<std::size_t, 2>> blocks;
        if (end > begin) {
            blocks.push_back({begin, end});
        }
        finish = rank_order_fold(result, std::move(blocks), element_size, size, rank, reducer,
                                 state->scratch);
    }
    state->engine = std::make_unique<coll::Engine>(comm, state->connections, std::move(steps),
                                                   element_size, reducer, where, in_place);
    if (finish) {
        state->engine->set_finish(std::move(finish));
    }
    state->engine->set_work(work);
    return CollectiveCore(std::move(state));
}

CollectiveCore CollectiveCore::barrier(const Communicator& comm) {
    auto state = std::make_unique<CollectiveState>();
    state->what = "barrier" + on_rank(comm);
    Descriptor descriptor;
    descriptor.values = {static_cast<std::int64_t>(Kind::barrier), 0, 0, 0, 0, 0, -1, 0};
    const Agreement agreement = agree(comm, state->connections, descriptor, state->what, {});
    state->owned_result = allocate_owned(1);
    state->result = state->owned_result.get();
    // Ranks on one node take one step to and from every rank (as the direct allreduce does):
    // where they outnumber the cores, each step of the dissemination costs a switch per rank.
    const bool direct =
        comm.size() > 2 && comm.size() <= direct_max_ranks && agreement.share_memory;
    state->engine = std::make_unique<coll::Engine>(
        comm, state->connections,
        direct ? coll::direct_barrier(comm.size(), comm.rank())
               : coll::dissemination_barrier(comm.size(), comm.rank()),
        1, nullptr, state->what);
    state->engine->set_work(state->result);
    return CollectiveCore(std::move(state));
}

CollectiveCore CollectiveCore::broadcast(const Communicator& comm, std::size_t element_size,
                                         std::size_t count, int root, void* buffer) {
    auto state = std::make_unique<CollectiveState>();
    state->what = "broadcast of " + std::to_string(count) + " x " + std::to_string(element_size) +
                  " B from root " + std::to_string(root) + on_rank(comm);
    const std::size_t bytes = checked_product(count, element_size, state->what);
    Descriptor descriptor;
    descriptor.values = {static_cast<std::int64_t>(Kind::broadcast),
                         static_cast<std::int64_t>(element_size),
                         static_cast<std::int64_t>(count),
                         0,
                         0,
                         0,
                         root,
                         0};
    agree(comm, state->connections, descriptor, state->what, {});
    if (root < 0 || root >= comm.size()) {
        raise<ArgumentError>("root " + std::to_string(root) + " is not a rank of the communicator",
                             state->what, "Pass a root between 0 and size - 1.");
    }
    if (buffer == nullptr) {
        state->owned_result = allocate_owned(bytes);
        state->result = state->owned_result.get();
    } else {
        state->result = static_cast<std::byte*>(buffer);
    }
    state->engine = std::make_unique<coll::Engine>(
        comm, state->connections,
        coll::binomial_broadcast(comm.size(), comm.rank(), root, count, element_size), element_size,
        nullptr, state->what);
    state->engine->set_work(state->result);
    return CollectiveCore(std::move(state));
}

CollectiveCore CollectiveCore::allgather(const Communicator& comm, std::size_t element_size,
                                         std::size_t count, const void* in, void* out) {
    auto state = std::make_unique<CollectiveState>();
    state->what = "allgather of " + std::to_string(count) + " x " + std::to_string(element_size) +
                  " B per rank" + on_rank(comm);
    const std::size_t bytes = checked_product(count, element_size, state->what);
    const std::size_t total =
        checked_product(bytes, static_cast<std::size_t>(comm.size()), state->what);
    Descriptor descriptor;
    descriptor.values = {static_cast<std::int64_t>(Kind::allgather),
                         static_cast<std::int64_t>(element_size),
                         static_cast<std::int64_t>(count),
                         0,
                         0,
                         0,
                         -1,
                         0};
    const bool null_buffer = bytes > 0 && (in == nullptr) != (out == nullptr);
    descriptor.values[Descriptor::fields - 1] = null_buffer ? 1 : 0;
    agree(comm, state->connections, descriptor, state->what,
          null_buffer ? "one of the input and output buffers is null; pass both user buffers, or "
                        "neither for library-owned memory"
                      : "");
    const std::byte* source = nullptr;
    if (out == nullptr) {
        state->owned_result = allocate_owned(total);
        state->owned_input = allocate_owned(bytes);
        state->result = state->owned_result.get();
        state->input = state->owned_input.get();
        source = state->input;
    } else {
        state->result = static_cast<std::byte*>(out);
        source = static_cast<const std::byte*>(in);
    }
    std::byte* own_slot = state->result + static_cast<std::size_t>(comm.rank()) * bytes;
    if (source != own_slot && bytes > 0) {
        state->before = [own_slot, source, bytes] { std::memmove(own_slot, source, bytes); };
    }
    auto steps =
        total <= allgather_ring_threshold_bytes
            ? coll::recursive_doubling_allgather(comm.size(), comm.rank(), count, element_size)
            : coll::ring_allgather(comm.size(), comm.rank(), count, element_size);
    state->engine = std::make_unique<coll::Engine>(comm, state->connections, std::move(steps),
                                                   element_size, nullptr, state->what);
    state->engine->set_work(state->result);
    return CollectiveCore(std::move(state));
}

} // namespace detail
} // namespace pmr
