// SPDX-License-Identifier: MIT
// Persistent collectives: every result is compared bit for bit with a reference that this rank
// computes from the inputs of all ranks (which every rank can generate) in the documented order of
// the algorithm; all element types and operations, forced algorithms and both orders, sizes from 0
// to beyond the ring threshold, repeated runs with new inputs, every kind of buffer, wait() and
// test() polling; barrier timing, broadcast from every root, allgather; and the errors.
#include "support.hpp"

#include <pmr/collectives.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

using pmr_test::message_of;
using pmr_test::mix;
using pmr_test::start_together;

namespace {

// ---- Inputs every rank can generate for every rank --------------------------------------------

/// A value of type T from 64 random bits: floating-point values spread over many magnitudes and
/// both signs, so that the order of a sum shows in the last bits.
template <class T>
T value_of(std::uint64_t bits) {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
        const double mantissa = static_cast<double>(bits >> 11U) / 9007199254740992.0; // [0, 1)
        const int exponent = static_cast<int>((bits >> 3U) % 17) - 8;
        const double sign = (bits & 1U) != 0 ? -1.0 : 1.0;
        return static_cast<T>(sign * std::ldexp(0.5 + mantissa, exponent));
    } else if constexpr (std::is_same_v<T, std::int32_t> || std::is_same_v<T, std::int64_t>) {
        // Large values too, so that sums wrap around.
        return static_cast<T>(bits);
    } else {
        using R = typename T::value_type;
        return T(value_of<R>(bits), value_of<R>(mix(bits)));
    }
}

template <class T>
std::vector<T> input_of(int rank, std::size_t count, std::uint64_t seed) {
    std::vector<T> v(count);
    for (std::size_t i = 0; i < count; ++i) {
        v[i] = value_of<T>(pmr_test::seed_of({seed, static_cast<std::uint64_t>(rank), i}));
    }
    return v;
}

// ---- Reference reductions, written independently of the library --------------------------------

template <class T>
T apply(pmr::ReduceOp op, T lower, T upper) {
    if constexpr (std::is_integral_v<T>) {
        using U = std::make_unsigned_t<T>;
        if (op == pmr::ReduceOp::sum) {
            return static_cast<T>(static_cast<U>(lower) + static_cast<U>(upper));
        }
    } else {
        if (op == pmr::ReduceOp::sum) {
            return lower + upper;
        }
    }
    if constexpr (std::is_arithmetic_v<T>) {
        if (op == pmr::ReduceOp::max) {
            return upper > lower ? upper : lower;
        }
        return upper < lower ? upper : lower;
    } else {
        return lower; // not reached: complex max/min are refused
    }
}

/// x_0 op x_1 op ... op x_{p-1}, left to right.
template <class T>
T fold_by_rank(const std::vector<std::vector<T>>& x, std::size_t i, pmr::ReduceOp op) {
    T acc = x[0][i];
    for (std::size_t r = 1; r < x.size(); ++r) {
        acc = apply(op, acc, x[r][i]);
    }
    return acc;
}

/// The tree of recursive doubling: pairs (2i, 2i+1) of the first 2 (p - 2^k) ranks first, then
/// halves combined lower with upper.
template <class T>
T fold_by_tree(const std::vector<std::vector<T>>& x, std::size_t i, pmr::ReduceOp op) {
    const std::size_t p = x.size();
    std::size_t pow2 = 1;
    while (pow2 * 2 <= p) {
        pow2 *= 2;
    }
    const std::size_t extra = p - pow2;
    std::vector<T> level;
    for (std::size_t r = 0; r < p;) {
        if (r < 2 * extra) {
            level.push_back(apply(op, x[r][i], x[r + 1][i]));
            r += 2;
        } else {
            level.push_back(x[r][i]);
            ++r;
        }
    }
    while (level.size() > 1) {
        std::vector<T> next;
        for (std::size_t k = 0; k < level.size(); k += 2) {
            next.push_back(apply(op, level[k], level[k + 1]));
        }
        level.swap(next);
    }
    return level[0];
}

/// The chain of the ring: chunk c (of p nearly equal chunks, larger ones first) is combined
/// x_c op x_{c+1} op ... op x_{c-1}.
template <class T>
T fold_by_ring(const std::vector<std::vector<T>>& x, std::size_t i, std::size_t count,
               pmr::ReduceOp op) {
    const std::size_t p = x.size();
    const std::size_t base = count / p;
    const std::size_t larger = count % p;
    std::size_t chunk = 0;
    while (chunk + 1 < p && i >= (chunk + 1) * base + std::min(chunk + 1, larger)) {
        ++chunk;
    }
    T acc = x[chunk][i];
    for (std::size_t s = 1; s < p; ++s) {
        acc = apply(op, acc, x[(chunk + s) % p][i]);
    }
    return acc;
}

/// Chunk of index `i` when `length` elements are cut into n nearly equal chunks, larger first.
std::size_t chunk_index(std::size_t i, std::size_t length, std::size_t n) {
    const std::size_t base = length / n;
    const std::size_t larger = length % n;
    const std::size_t boundary = larger * (base + 1);
    return i < boundary ? i / (base + 1) : larger + (i - boundary) / base;
}

/// Trinaryx3 on a 3D grid (`rank_at` by coordinates, row-major): part p = i's third of the
/// vector visits the dimensions p, p+1, p+2 (mod 3); in each, the piece is cut into extent chunks
/// and i's chunk q is combined along the coordinates q+1, q+2, ..., q (mod extent). The result is
/// the fold along the last dimension of folds along the second of folds along the first.
template <class T>
T fold_by_trinaryx3(const std::vector<std::vector<T>>& x, std::size_t i, std::size_t count,
                    pmr::ReduceOp op, const std::array<int, 3>& extents,
                    const std::vector<int>& rank_at) {
    const std::size_t part = chunk_index(i, count, 3);
    std::size_t begin = part * (count / 3) + std::min<std::size_t>(part, count % 3);
    std::size_t length = count / 3 + (part < count % 3 ? 1 : 0);
    std::array<std::size_t, 3> dims{};
    std::array<std::size_t, 3> chunks{};
    for (std::size_t k = 0; k < 3; ++k) {
        dims[k] = (part + k) % 3;
        const auto n = static_cast<std::size_t>(extents[dims[k]]);
        const std::size_t q = chunk_index(i - begin, length, n);
        chunks[k] = q;
        const std::size_t base = length / n;
        const std::size_t larger = length % n;
        begin += q * base + std::min(q, larger);
        length = base + (q < larger ? 1 : 0);
    }
    std::array<int, 3> c{};
    std::function<T(int)> value = [&](int level) -> T {
        if (level < 0) {
            const int at = (c[0] * extents[1] + c[1]) * extents[2] + c[2];
            return x[static_cast<std::size_t>(rank_at[static_cast<std::size_t>(at)])][i];
        }
        const auto k = static_cast<std::size_t>(level);
        const int n = extents[dims[k]];
        const auto q = static_cast<int>(chunks[k]);
        c[dims[k]] = (q + 1) % n;
        T acc = value(level - 1);
        for (int t = 2; t <= n; ++t) {
            c[dims[k]] = (q + t) % n;
            acc = apply(op, acc, value(level - 1));
        }
        return acc;
    };
    return value(2);
}

/// rank_at of a 3D Cartesian communicator (row-major coordinates).
std::vector<int> ranks_by_coordinates(const pmr::Communicator& comm) {
    std::vector<int> rank_at(static_cast<std::size_t>(comm.size()));
    const auto& e = comm.extents();
    for (int c0 = 0; c0 < e[0]; ++c0) {
        for (int c1 = 0; c1 < e[1]; ++c1) {
            for (int c2 = 0; c2 < e[2]; ++c2) {
                std::array<int, 3> c = {c0, c1, c2};
                int r = 0;
                MPI_Cart_rank(comm.get(), c.data(), &r);
                const int at = (c0 * e[1] + c1) * e[2] + c2;
                rank_at[static_cast<std::size_t>(at)] = r;
            }
        }
    }
    return rank_at;
}

template <class T>
std::vector<T> reference(const pmr::Communicator& comm, const std::vector<std::vector<T>>& x,
                         std::size_t count, pmr::ReduceOp op, pmr::AllreduceAlgorithm algorithm,
                         pmr::ReductionOrder order) {
    std::vector<T> out(count);
    std::vector<int> rank_at;
    std::array<int, 3> extents{};
    if (algorithm == pmr::AllreduceAlgorithm::trinaryx3) {
        rank_at = ranks_by_coordinates(comm);
        std::copy(comm.extents().begin(), comm.extents().end(), extents.begin());
    }
    for (std::size_t i = 0; i < count; ++i) {
        if (order == pmr::ReductionOrder::rank || x.size() == 1 ||
            algorithm == pmr::AllreduceAlgorithm::direct) {
            out[i] = fold_by_rank(x, i, op);
        } else if (algorithm == pmr::AllreduceAlgorithm::trinaryx3) {
            out[i] = fold_by_trinaryx3(x, i, count, op, extents, rank_at);
        } else if (algorithm == pmr::AllreduceAlgorithm::ring) {
            out[i] = fold_by_ring(x, i, count, op);
        } else {
            out[i] = fold_by_tree(x, i, op);
        }
    }
    return out;
}

// ---- One configuration -------------------------------------------------------------------------

enum class Buffers { owned, in_place, separate };

const char* to_string(Buffers buffers) {
    switch (buffers) {
    case Buffers::owned:
        return "library-owned";
    case Buffers::in_place:
        return "user, in place";
    case Buffers::separate:
        return "user, separate";
    }
    return "?";
}

template <class T>
bool same_bits(const T* a, const T* b, std::size_t count) {
    // Bitwise equality is the point (the element types have no padding).
    // NOLINTNEXTLINE(bugprone-suspicious-memory-comparison)
    return count == 0 || std::memcmp(a, b, count * sizeof(T)) == 0;
}

/// Index of the first element that differs bitwise, or count.
template <class T>
std::size_t first_difference(const T* a, const T* b, std::size_t count) {
    for (std::size_t i = 0; i < count; ++i) {
        // NOLINTNEXTLINE(bugprone-suspicious-memory-comparison): bitwise equality is the point
        if (std::memcmp(a + i, b + i, sizeof(T)) != 0) {
            return i;
        }
    }
    return count;
}

template <class T>
void check_allreduce(const pmr::Communicator& comm, std::size_t count, pmr::ReduceOp op,
                     pmr::AllreduceOptions options, Buffers buffers,
                     pmr_test::Completion completion, int rounds = 3) {
    const int rank = comm.rank();
    const int size = comm.size();
    std::vector<T> user_in(count);
    std::vector<T> user_out(count);
    pmr::Allreduce<T> reduce;
    switch (buffers) {
    case Buffers::owned:
        reduce = pmr::Allreduce<T>(comm, count, op, options);
        break;
    case Buffers::in_place:
        reduce = pmr::Allreduce<T>(comm, user_out.data(), count, op, options);
        break;
    case Buffers::separate:
        reduce = pmr::Allreduce<T>(comm, user_in.data(), user_out.data(), count, op, options);
        break;
    }
    INFO(reduce.describe() << ", " << to_string(buffers) << ", " << to_string(completion));
    if (options.algorithm != pmr::AllreduceAlgorithm::automatic) {
        CHECK(reduce.algorithm() == options.algorithm);
    }
    for (int round = 0; round < rounds; ++round) {
        const auto seed = pmr_test::seed_of(
            {count, static_cast<std::uint64_t>(round), static_cast<std::uint64_t>(op)});
        std::vector<std::vector<T>> all;
        all.reserve(static_cast<std::size_t>(size));
        for (int r = 0; r < size; ++r) {
            all.push_back(input_of<T>(r, count, seed));
        }
        const std::vector<T>& mine = all[static_cast<std::size_t>(rank)];
        if (buffers == Buffers::separate) {
            user_in = mine;
            std::fill(user_out.begin(), user_out.end(), T{});
        } else {
            std::copy(mine.begin(), mine.end(), reduce.data());
        }
        if (completion == pmr_test::Completion::wait) {
            reduce();
        } else {
            reduce.start();
            if (buffers == Buffers::separate) {
                // The input is the caller's again once start() has returned.
                std::fill(user_in.begin(), user_in.end(), T{});
            }
            pmr_test::complete_by_test(reduce);
        }
        const auto expected = reference(comm, all, count, op, reduce.algorithm(), reduce.order());
        const std::size_t differs = first_difference(reduce.data(), expected.data(), count);
        INFO("round " << round << ", first differing element " << differs << " of " << count);
        CHECK(differs == count);
        if (buffers == Buffers::separate && completion == pmr_test::Completion::wait) {
            CHECK(same_bits(user_in.data(), mine.data(), count)); // the input is left alone
        }
    }
}

constexpr std::array<pmr::AllreduceAlgorithm, 3> algorithms = {
    pmr::AllreduceAlgorithm::recursive_doubling, pmr::AllreduceAlgorithm::ring,
    pmr::AllreduceAlgorithm::direct};
constexpr std::array<pmr::ReductionOrder, 2> orders = {pmr::ReductionOrder::algorithm,
                                                       pmr::ReductionOrder::rank};

template <class T>
void check_type(const pmr::Communicator& comm, const std::vector<pmr::ReduceOp>& ops) {
    int variant = 0;
    for (auto op : ops) {
        for (auto algorithm : algorithms) {
            for (auto order : orders) {
                for (std::size_t count : {std::size_t{1}, std::size_t{7}, std::size_t{1000}}) {
                    const auto buffers = static_cast<Buffers>(variant % 3);
                    const auto completion =
                        variant % 2 == 0 ? pmr_test::Completion::wait : pmr_test::Completion::test;
                    ++variant;
                    check_allreduce<T>(comm, count, op, {algorithm, order}, buffers, completion);
                }
            }
        }
    }
}

std::vector<pmr::ReduceOp> real_ops() {
    return {pmr::ReduceOp::sum, pmr::ReduceOp::max, pmr::ReduceOp::min};
}

/// Runs `reduce` (on `in`, `out`) `runs` times on the input `x`: every run must give bitwise the
/// result of the first, and every rank the same bits (compared by hashes of the bits).
void check_reproducible(pmr::Allreduce<double>& reduce, const std::vector<double>& x,
                        std::vector<double>& in, const std::vector<double>& out, int runs) {
    INFO(reduce.describe());
    std::vector<double> first;
    for (int run = 0; run < runs; ++run) {
        in = x;
        reduce();
        if (run == 0) {
            first = out;
        } else if (!same_bits(first.data(), out.data(), out.size())) {
            FAIL_CHECK("run " << run << " differs from run 0");
            break;
        }
    }
    unsigned long long hash = 0;
    for (double v : first) {
        std::uint64_t bits = 0;
        std::memcpy(&bits, &v, sizeof bits);
        hash = mix(hash ^ bits);
    }
    std::vector<unsigned long long> hashes(static_cast<std::size_t>(pmr_test::world_size()));
    MPI_Allgather(&hash, 1, MPI_UNSIGNED_LONG_LONG, hashes.data(), 1, MPI_UNSIGNED_LONG_LONG,
                  MPI_COMM_WORLD);
    for (auto h : hashes) {
        CHECK(h == hash);
    }
}

} // namespace

TEST_CASE("allreduce: every type and operation, bitwise against the reference", "[allreduce]") {
    start_together();
    pmr::Communicator comm(MPI_COMM_WORLD);
    SECTION("float") {
        check_type<float>(comm, real_ops());
    }
    SECTION("double") {
        check_type<double>(comm, real_ops());
    }
    SECTION("int32_t") {
        check_type<std::int32_t>(comm, real_ops());
    }
    SECTION("int64_t") {
        check_type<std::int64_t>(comm, real_ops());
    }
    SECTION("complex<float>") {
        check_type<std::complex<float>>(comm, {pmr::ReduceOp::sum});
    }
    SECTION("complex<double>") {
        check_type<std::complex<double>>(comm, {pmr::ReduceOp::sum});
    }
}

namespace {

// The special values of max and min as docs/collectives.md documents them: NaN wins, +0 is above
// -0, the infinities order like numbers. Each pattern is one element; `result` says what every rank
// must get. Repeated over `count` elements, so that the ring's chunks carry every pattern.
template <class T>
void check_special_values(const pmr::Communicator& comm, pmr::ReduceOp op, std::size_t count,
                          pmr::AllreduceOptions options) {
    const T nan = std::numeric_limits<T>::quiet_NaN();
    const T inf = std::numeric_limits<T>::infinity();
    const int p = comm.size();
    const int r = comm.rank();
    const T last = static_cast<T>(p - 1);
    const bool is_max = op == pmr::ReduceOp::max;
    struct Pattern {
        T mine;
        T result;
    };
    const Pattern patterns[] = {
        {r == p - 1 ? nan : T(r + 1), nan},                           // NaN on the last rank
        {r == 0 ? nan : T(r + 1), nan},                               // NaN on the first rank
        {r % 2 == 0 ? T(0) : -T(0), is_max || p == 1 ? T(0) : -T(0)}, // +0, -0, +0, ...
        {r % 2 == 0 ? -T(0) : T(0), is_max && p > 1 ? T(0) : -T(0)},  // -0, +0, -0, ...
        {r == p - 1 ? inf : -T(r + 1), is_max ? inf : (p == 1 ? inf : -last)},
        {r == 0 ? -inf : T(r), is_max ? (p == 1 ? -inf : last) : -inf},
        {-inf, -inf},
        {inf, inf},
    };
    constexpr std::size_t kinds = sizeof patterns / sizeof patterns[0];
    pmr::Allreduce<T> reduce(comm, count, op, options);
    INFO(reduce.describe());
    for (std::size_t i = 0; i < count; ++i) {
        reduce[i] = patterns[i % kinds].mine;
    }
    reduce();
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < count; ++i) {
        const T want = patterns[i % kinds].result;
        const T got = reduce[i];
        const bool same = std::isnan(want) ? std::isnan(got)
                                           : got == want && std::signbit(got) == std::signbit(want);
        if (!same && wrong++ == 0) {
            FAIL_CHECK("element " << i << " (pattern " << i % kinds << "): " << got << ", expected "
                                  << want);
        }
    }
    CHECK(wrong == 0);
}

} // namespace

TEST_CASE("allreduce: max and min of NaN, +-0 and infinities as documented, on every rank",
          "[allreduce]") {
    start_together();
    pmr::Communicator comm(MPI_COMM_WORLD);
    for (auto op : {pmr::ReduceOp::max, pmr::ReduceOp::min}) {
        for (auto algorithm : algorithms) {
            for (auto order : orders) {
                // One element of each pattern, and enough for the ring's chunks (160 KiB).
                for (std::size_t count : {std::size_t{8}, std::size_t{8} * 2600}) {
                    check_special_values<double>(comm, op, count, {algorithm, order});
                    check_special_values<float>(comm, op, count, {algorithm, order});
                }
            }
        }
    }
}

TEST_CASE("allreduce: sizes from 0 to beyond the ring threshold", "[allreduce]") {
    start_together();
    pmr::Communicator comm(MPI_COMM_WORLD);
    const std::size_t large = 20000; // 160 KB of doubles: above the ring threshold
    for (std::size_t count :
         {std::size_t{0}, std::size_t{1}, std::size_t{2}, std::size_t{3}, std::size_t{5},
          std::size_t{8}, std::size_t{13}, std::size_t{4099}, large}) {
        for (auto algorithm : algorithms) {
            for (auto order : orders) {
                check_allreduce<double>(comm, count, pmr::ReduceOp::sum, {algorithm, order},
                                        Buffers::separate, pmr_test::Completion::wait, 2);
            }
        }
        check_allreduce<double>(comm, count, pmr::ReduceOp::sum, {}, Buffers::owned,
                                pmr_test::Completion::test, 2);
    }
}

TEST_CASE("allreduce: the automatic choice", "[allreduce]") {
    start_together();
    pmr::Communicator comm(MPI_COMM_WORLD);
    pmr::Allreduce<double> small(comm, 1, pmr::ReduceOp::sum);
    pmr::Allreduce<double> large(comm, 1 << 17, pmr::ReduceOp::sum);
    if (pmr_test::environment("PMR_ALLREDUCE_ALGORITHM")) {
        return; // the variant with the environment checks it
    }
    CHECK(small.order() == pmr::ReductionOrder::algorithm);
    const auto forced = pmr_test::environment("PMR_PROVIDER");
    if (comm.size() > 1 && (!forced || *forced == "shm")) {
        // The tests run on one node: shared memory takes the direct algorithm.
        CHECK(small.algorithm() == (comm.size() == 2 ? pmr::AllreduceAlgorithm::recursive_doubling
                                                     : pmr::AllreduceAlgorithm::direct));
        CHECK(large.algorithm() == pmr::AllreduceAlgorithm::direct);
        return;
    }
    CHECK(small.algorithm() == pmr::AllreduceAlgorithm::recursive_doubling);
    CHECK(large.algorithm() == (comm.size() > 2 ? pmr::AllreduceAlgorithm::ring
                                                : pmr::AllreduceAlgorithm::recursive_doubling));
}

TEST_CASE("allreduce: the rank order gives one result whatever the algorithm", "[allreduce]") {
    start_together();
    pmr::Communicator comm(MPI_COMM_WORLD);
    const std::size_t count = 5000;
    const auto x = input_of<double>(comm.rank(), count, 99);
    std::vector<std::vector<double>> results;
    for (auto algorithm : algorithms) {
        pmr::Allreduce<double> reduce(comm, count, pmr::ReduceOp::sum,
                                      {algorithm, pmr::ReductionOrder::rank});
        std::copy(x.begin(), x.end(), reduce.data());
        reduce();
        results.emplace_back(reduce.data(), reduce.data() + count);
    }
    for (std::size_t i = 1; i < results.size(); ++i) {
        INFO("algorithm " << pmr::to_string(algorithms[i]));
        CHECK(same_bits(results[0].data(), results[i].data(), count));
    }
}

TEST_CASE("allreduce: direct leaves a user buffer filled before construction alone until start()",
          "[allreduce]") {
    // Its windows lie over the buffer; the set-up run must move no data through them.
    start_together();
    pmr::Communicator comm(MPI_COMM_WORLD);
    const auto size = static_cast<std::size_t>(comm.size());
    for (std::size_t count : {std::size_t{3}, std::size_t{20000}}) {
        std::vector<std::vector<double>> all;
        for (std::size_t r = 0; r < size; ++r) {
            all.push_back(input_of<double>(static_cast<int>(r), count, 7 + count));
        }
        std::vector<double> user = all[static_cast<std::size_t>(comm.rank())];
        pmr::Allreduce<double> reduce(comm, user.data(), count, pmr::ReduceOp::sum,
                                      {pmr::AllreduceAlgorithm::direct});
        INFO(reduce.describe());
        CHECK(same_bits(user.data(), all[static_cast<std::size_t>(comm.rank())].data(), count));
        reduce();
        const auto expected =
            reference(comm, all, count, pmr::ReduceOp::sum, pmr::AllreduceAlgorithm::direct,
                      pmr::ReductionOrder::algorithm);
        CHECK(first_difference(user.data(), expected.data(), count) == count);
    }
}

TEST_CASE("allreduce: 100 runs of a sum of 10^5 doubles give one bit pattern on every rank",
          "[allreduce][reproducible]") {
    start_together();
    pmr::Communicator comm(MPI_COMM_WORLD);
    const std::size_t count = 100000;
    const auto x = input_of<double>(comm.rank(), count, 4242);
    for (auto algorithm : algorithms) {
        std::vector<double> in(count);
        std::vector<double> out(count);
        pmr::Allreduce<double> big(comm, in.data(), out.data(), count, pmr::ReduceOp::sum,
                                   {algorithm});
        INFO(big.describe());
        check_reproducible(big, x, in, out, 100);
    }
}

TEST_CASE("allreduce: errors are clear exceptions on every rank, never hangs",
          "[allreduce][errors]") {
    start_together();
    pmr::Communicator comm(MPI_COMM_WORLD);
    const int rank = comm.rank();
    if (comm.size() > 1) {
        const std::string counts = message_of<pmr::ArgumentError>(
            [&] { pmr::Allreduce<double> bad(comm, rank == 0 ? 4 : 5, pmr::ReduceOp::sum); });
        CHECK_THAT(counts, Catch::Contains("count") && Catch::Contains("rank 0 has 4") &&
                               Catch::Contains("has 5"));
        const std::string ops = message_of<pmr::ArgumentError>([&] {
            pmr::Allreduce<double> bad(comm, 4,
                                       rank == 0 ? pmr::ReduceOp::max : pmr::ReduceOp::sum);
        });
        CHECK_THAT(ops, Catch::Contains("operation"));
        const std::string roots = message_of<pmr::ArgumentError>(
            [&] { pmr::Broadcast<int> bad(comm, 4, rank == 0 ? 0 : 1); });
        CHECK_THAT(roots, Catch::Contains("root"));
    }
    // The type is part of the agreement too: a float and a double allreduce of the same count.
    if (comm.size() > 1) {
        const std::string types = message_of<pmr::ArgumentError>([&] {
            if (rank == 0) {
                pmr::Allreduce<float> bad(comm, 4, pmr::ReduceOp::sum);
            } else {
                pmr::Allreduce<double> bad(comm, 4, pmr::ReduceOp::sum);
            }
        });
        CHECK_THAT(types, Catch::Contains("element type"));
    }
    CHECK_THAT(message_of<pmr::ArgumentError>(
                   [&] { pmr::Allreduce<std::complex<double>> bad(comm, 4, pmr::ReduceOp::max); }),
               Catch::Contains("max is not defined for complex<double>"));
    // Trinaryx3 needs a 3D grid (this communicator has none), and then rails (below).
    CHECK_THAT(message_of<pmr::ArgumentError>([&] {
                   pmr::Allreduce<double> bad(comm, 4, pmr::ReduceOp::sum,
                                              {pmr::AllreduceAlgorithm::trinaryx3});
               }),
               Catch::Contains("trinaryx3") && Catch::Contains("3D Cartesian") &&
                   Catch::Contains("0 grid dimension(s)") && Catch::Contains("PMR_TOFU_TNIS"));
    CHECK_THAT(message_of<pmr::ArgumentError>([&] { pmr::Broadcast<int> bad(comm, 4, -1); }),
               Catch::Contains("root -1"));

    pmr::Allreduce<double> reduce(comm, 4, pmr::ReduceOp::sum);
    CHECK_THROWS_AS(reduce.wait(), pmr::UsageError);
    reduce.start();
    CHECK_THROWS_AS(reduce.start(), pmr::UsageError);
    reduce.wait();
    CHECK_FALSE(reduce.active());
    pmr::Allreduce<double> empty;
    CHECK_FALSE(empty);
    CHECK_THROWS_AS(empty.start(), pmr::UsageError);
    // Still usable after the misuse.
    reduce[0] = 1.0;
    reduce();
    CHECK(reduce[0] == static_cast<double>(comm.size()));
}

TEST_CASE("allreduce: a bad PMR_ALLREDUCE_ALGORITHM is an ArgumentError on every rank",
          "[.][bad-env]") {
    start_together();
    pmr::Communicator comm(MPI_COMM_WORLD);
    CHECK_THAT(message_of<pmr::ArgumentError>(
                   [&] { pmr::Allreduce<double> bad(comm, 4, pmr::ReduceOp::sum); }),
               Catch::Contains("PMR_ALLREDUCE_ALGORITHM"));
}

TEST_CASE("allreduce: PMR_ALLREDUCE_ALGORITHM overrides the automatic choice", "[.][env]") {
    start_together();
    pmr::Communicator comm(MPI_COMM_WORLD);
    pmr::Allreduce<double> reduce(comm, 3, pmr::ReduceOp::sum);
    CHECK(reduce.algorithm() == pmr::AllreduceAlgorithm::ring);
    check_allreduce<double>(comm, 3, pmr::ReduceOp::sum, {}, Buffers::owned,
                            pmr_test::Completion::wait);
    check_allreduce<float>(comm, 100, pmr::ReduceOp::sum, {}, Buffers::owned,
                           pmr_test::Completion::wait);
}

TEST_CASE("allreduce: a rank that never starts is a Timeout naming the collective",
          "[.][timeout]") {
    // Run with PMR_TIMEOUT=2 on 2 ranks.
    start_together();
    pmr::Communicator comm(MPI_COMM_WORLD);
    pmr::Allreduce<double> reduce(comm, 4, pmr::ReduceOp::sum);
    if (comm.rank() == 0) {
        reduce.start();
        CHECK_THAT(message_of<pmr::Timeout>([&] { reduce.wait(); }),
                   Catch::Contains("PMR_TIMEOUT") && Catch::Contains("While running: allreduce"));
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

TEST_CASE("allreduce: wait() after a Timeout waits for the rest of the run", "[.][timeout]") {
    // Run with PMR_TIMEOUT=2 on 2 ranks: the last rank starts 3.5 s late.
    start_together();
    pmr::Communicator comm(MPI_COMM_WORLD);
    pmr::Allreduce<double> reduce(comm, 4, pmr::ReduceOp::sum);
    const int late = comm.size() - 1;
    for (int run = 0; run < 2; ++run) {
        std::fill(reduce.data(), reduce.data() + 4, comm.rank() + 1.0);
        MPI_Barrier(MPI_COMM_WORLD);
        if (run == 0 && comm.rank() == late) {
            std::this_thread::sleep_for(std::chrono::milliseconds(3500));
        }
        reduce.start();
        // A UsageError for a window waited on twice would propagate and fail the test.
        const int timeouts = pmr_test::wait_through_timeouts(reduce);
        INFO("run " << run);
        if (run == 0 && comm.rank() != late) {
            CHECK(timeouts >= 1); // the late rank starts 3.5 s late: PMR_TIMEOUT=2
        } else {
            CHECK(timeouts == 0);
        }
        const double sum = comm.size() * (comm.size() + 1) / 2.0;
        CHECK(std::all_of(reduce.data(), reduce.data() + 4, [&](double v) { return v == sum; }));
    }
}

TEST_CASE("barrier: no rank leaves before every rank has entered", "[barrier]") {
    start_together();
    pmr::Communicator comm(MPI_COMM_WORLD);
    pmr::Barrier barrier(comm);
    using Clock = std::chrono::steady_clock; // one clock for every process of the node
    for (int round = 0; round < 5; ++round) {
        // A different rank comes late each round.
        if (comm.rank() == round % comm.size()) {
            std::this_thread::sleep_for(std::chrono::milliseconds(30));
        }
        const auto enter = Clock::now().time_since_epoch().count();
        if (round % 2 == 0) {
            barrier();
        } else {
            barrier.start();
            pmr_test::complete_by_test(barrier);
        }
        const auto leave = Clock::now().time_since_epoch().count();
        std::vector<long long> enters(static_cast<std::size_t>(comm.size()));
        std::vector<long long> leaves(enters.size());
        const long long e = enter;
        const long long l = leave;
        MPI_Allgather(&e, 1, MPI_LONG_LONG, enters.data(), 1, MPI_LONG_LONG, MPI_COMM_WORLD);
        MPI_Allgather(&l, 1, MPI_LONG_LONG, leaves.data(), 1, MPI_LONG_LONG, MPI_COMM_WORLD);
        INFO("round " << round);
        CHECK(*std::max_element(enters.begin(), enters.end()) <=
              *std::min_element(leaves.begin(), leaves.end()));
    }
}

TEST_CASE("broadcast: from every root, every size", "[broadcast]") {
    start_together();
    pmr::Communicator comm(MPI_COMM_WORLD);
    for (int root = 0; root < comm.size(); ++root) {
        for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{3}, std::size_t{1000},
                                  std::size_t{70000}}) {
            std::vector<std::int64_t> user(count);
            const bool owned = (root + count) % 2 == 0;
            pmr::Broadcast<std::int64_t> bcast =
                owned ? pmr::Broadcast<std::int64_t>(comm, count, root)
                      : pmr::Broadcast<std::int64_t>(comm, user.data(), count, root);
            INFO(bcast.describe());
            for (int round = 0; round < 2; ++round) {
                const auto expected = input_of<std::int64_t>(root, count, 7 + round);
                if (comm.rank() == root) {
                    std::copy(expected.begin(), expected.end(), bcast.data());
                } else {
                    std::fill(bcast.data(), bcast.data() + count, -1);
                }
                bcast();
                CHECK(same_bits(bcast.data(), expected.data(), count));
            }
        }
    }
}

TEST_CASE("allgather: every rank's contribution in rank order", "[allgather]") {
    start_together();
    pmr::Communicator comm(MPI_COMM_WORLD);
    const auto size = static_cast<std::size_t>(comm.size());
    for (std::size_t count :
         {std::size_t{0}, std::size_t{1}, std::size_t{5}, std::size_t{4000}, std::size_t{40000}}) {
        for (bool owned : {true, false}) {
            std::vector<float> in(count);
            std::vector<float> out(count * size);
            pmr::Allgather<float> gather =
                owned ? pmr::Allgather<float>(comm, count)
                      : pmr::Allgather<float>(comm, in.data(), out.data(), count);
            INFO(gather.describe() << (owned ? ", library-owned" : ", user buffers"));
            for (int round = 0; round < 2; ++round) {
                const auto mine = input_of<float>(comm.rank(), count, 11 + round);
                std::copy(mine.begin(), mine.end(), owned ? gather.input() : in.data());
                gather();
                for (std::size_t r = 0; r < size; ++r) {
                    const auto expected = input_of<float>(static_cast<int>(r), count, 11 + round);
                    INFO("slot of rank " << r);
                    CHECK(same_bits(gather.data() + r * count, expected.data(), count));
                }
            }
        }
    }
}

// ---- Trinaryx3: three parts along the three dimensions in rotated order, one rail each --------

namespace {

/// 3D shapes of `size` ranks with extents up to 4 (balanced first), at most three of them (two
/// from 8 ranks on), so that 8 ranks on two cores stay fast: 2x2x2 and 4x2x1 for 8; 1x2x2,
/// 2x1x2, 2x2x1 for 4.
std::vector<std::vector<int>> shapes_of(int size) {
    std::vector<std::vector<int>> shapes;
    for (int a = 1; a <= 4; ++a) {
        for (int b = 1; b <= 4; ++b) {
            for (int c = 1; c <= 4; ++c) {
                if (a * b * c == size) {
                    shapes.push_back({a, b, c});
                }
            }
        }
    }
    auto spread = [](const std::vector<int>& s) { return *std::max_element(s.begin(), s.end()); };
    std::stable_sort(shapes.begin(), shapes.end(),
                     [&](const auto& x, const auto& y) { return spread(x) < spread(y); });
    if (size >= 8 && shapes.size() > 2) {
        shapes = {shapes[0], shapes.back()}; // 2x2x2 and 4x2x1: also fine under the sanitizers
    } else if (shapes.size() > 3) {
        shapes = {shapes[0], shapes[1], shapes.back()};
    }
    return shapes;
}

} // namespace

TEST_CASE("trinaryx3: where the provider has fewer than 3 rails it is refused on every rank",
          "[allreduce][trinaryx3-refused]") {
    start_together();
    if (pmr_test::environment("PMR_PROVIDER") == std::optional<std::string>("tofu") ||
        pmr_test::environment("PMR_RAILS")) {
        return; // with rails: the [trinaryx3] runs check it
    }
    pmr::Communicator grid(MPI_COMM_WORLD, {pmr_test::world_size(), 1, 1}, {true, true, true});
    if (grid.size() == 1) {
        // No neighbour, no rail needed: it runs.
        check_allreduce<double>(grid, 10, pmr::ReduceOp::sum, {pmr::AllreduceAlgorithm::trinaryx3},
                                Buffers::owned, pmr_test::Completion::wait);
        return;
    }
    CHECK_THAT(message_of<pmr::ArgumentError>([&] {
                   pmr::Allreduce<double> bad(grid, 10, pmr::ReduceOp::sum,
                                              {pmr::AllreduceAlgorithm::trinaryx3});
               }),
               Catch::Contains("at least 3 rails") && Catch::Contains("PMR_TOFU_TNIS") &&
                   Catch::Contains("1 rail(s)"));
    // Still usable afterwards: the refusal left no stale window behind.
    check_allreduce<double>(grid, 10, pmr::ReduceOp::sum, {}, Buffers::owned,
                            pmr_test::Completion::wait);
    // The automatic choice does not take it on one rail, however large the vector.
    pmr::Allreduce<double> automatic(grid, 40000, pmr::ReduceOp::sum);
    CHECK(automatic.algorithm() != pmr::AllreduceAlgorithm::trinaryx3);
    check_allreduce<double>(grid, 40000, pmr::ReduceOp::sum, {}, Buffers::owned,
                            pmr_test::Completion::wait);
}

TEST_CASE("trinaryx3: the automatic choice takes it on a 3D grid with rails from 128 KiB",
          "[.][trinaryx3]") {
    start_together();
    const auto shapes = shapes_of(pmr_test::world_size());
    pmr::Communicator grid(MPI_COMM_WORLD, shapes.front(), {true, true, true});
    const std::size_t large = std::size_t{128} * 1024 / sizeof(double);
    pmr::Allreduce<double> big(grid, large, pmr::ReduceOp::sum);
    CHECK(big.algorithm() == pmr::AllreduceAlgorithm::trinaryx3);
    pmr::Allreduce<double> small(grid, large - 1, pmr::ReduceOp::sum);
    CHECK(small.algorithm() != pmr::AllreduceAlgorithm::trinaryx3);
    // Bitwise what the named algorithm gives.
    const auto x = input_of<double>(grid.rank(), large, 91);
    pmr::Allreduce<double> named(grid, large, pmr::ReduceOp::sum,
                                 {pmr::AllreduceAlgorithm::trinaryx3});
    std::copy(x.begin(), x.end(), big.data());
    std::copy(x.begin(), x.end(), named.data());
    big();
    named();
    CHECK(same_bits(big.data(), named.data(), large));
    // A flat communicator keeps the other algorithms.
    pmr::Communicator flat(MPI_COMM_WORLD);
    pmr::Allreduce<double> unshaped(flat, large, pmr::ReduceOp::sum);
    CHECK(unshaped.algorithm() != pmr::AllreduceAlgorithm::trinaryx3);
}

TEST_CASE("trinaryx3: bitwise against its documented order on every 3D shape", "[.][trinaryx3]") {
    start_together();
    const auto shapes = shapes_of(pmr_test::world_size());
    for (const auto& shape : shapes) {
        for (bool periodic : {true, false}) {
            if (!periodic && &shape != &shapes.front()) {
                continue; // open borders (wrap-around over the long way) on one shape
            }
            pmr::Communicator grid(MPI_COMM_WORLD, shape, {periodic, periodic, periodic});
            INFO("grid " << shape[0] << " x " << shape[1] << " x " << shape[2]
                         << (periodic ? ", periodic" : ", open"));
            for (std::size_t count :
                 {std::size_t{0}, std::size_t{1}, std::size_t{2}, std::size_t{5}, std::size_t{23},
                  std::size_t{3000}, std::size_t{40001}}) {
                for (auto order : orders) {
                    check_allreduce<double>(grid, count, pmr::ReduceOp::sum,
                                            {pmr::AllreduceAlgorithm::trinaryx3, order},
                                            static_cast<Buffers>(count % 3),
                                            count % 2 == 0 ? pmr_test::Completion::wait
                                                           : pmr_test::Completion::test,
                                            2);
                }
            }
            if (!periodic) {
                continue;
            }
            // Every type and operation on the periodic grid.
            for (auto op : real_ops()) {
                for (auto order : orders) {
                    const pmr::AllreduceOptions t3{pmr::AllreduceAlgorithm::trinaryx3, order};
                    check_allreduce<float>(grid, 101, op, t3, Buffers::owned,
                                           pmr_test::Completion::wait, 1);
                    check_allreduce<std::int32_t>(grid, 37, op, t3, Buffers::in_place,
                                                  pmr_test::Completion::test, 1);
                    check_allreduce<std::int64_t>(grid, 64, op, t3, Buffers::separate,
                                                  pmr_test::Completion::wait, 1);
                    check_allreduce<double>(grid, 11, op, t3, Buffers::owned,
                                            pmr_test::Completion::test, 1);
                }
            }
            check_allreduce<std::complex<float>>(grid, 50, pmr::ReduceOp::sum,
                                                 {pmr::AllreduceAlgorithm::trinaryx3},
                                                 Buffers::separate, pmr_test::Completion::wait, 1);
            check_allreduce<std::complex<double>>(
                grid, 50, pmr::ReduceOp::sum,
                {pmr::AllreduceAlgorithm::trinaryx3, pmr::ReductionOrder::rank}, Buffers::owned,
                pmr_test::Completion::test, 1);
        }
    }
}

TEST_CASE("trinaryx3: rank order equals the other algorithms' rank order; runs repeat bitwise",
          "[.][trinaryx3]") {
    start_together();
    const auto shapes = shapes_of(pmr_test::world_size());
    pmr::Communicator grid(MPI_COMM_WORLD, shapes.front(), {true, true, true});
    const std::size_t count = 5000;
    const auto x = input_of<double>(grid.rank(), count, 77);
    std::vector<std::vector<double>> results;
    for (auto algorithm : {pmr::AllreduceAlgorithm::ring, pmr::AllreduceAlgorithm::trinaryx3}) {
        pmr::Allreduce<double> reduce(grid, count, pmr::ReduceOp::sum,
                                      {algorithm, pmr::ReductionOrder::rank});
        std::copy(x.begin(), x.end(), reduce.data());
        reduce();
        results.emplace_back(reduce.data(), reduce.data() + count);
    }
    CHECK(same_bits(results[0].data(), results[1].data(), count));

    std::vector<double> in(count);
    std::vector<double> out(count);
    pmr::Allreduce<double> big(grid, in.data(), out.data(), count, pmr::ReduceOp::sum,
                               {pmr::AllreduceAlgorithm::trinaryx3});
    check_reproducible(big, x, in, out, 20);
}
