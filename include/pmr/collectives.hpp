// SPDX-License-Identifier: MIT
/// @file collectives.hpp
/// Persistent collectives on pmr windows: Allreduce, Barrier, Broadcast and Allgather.
///
/// Each object is set up once on a pmr::Communicator (the constructors are collective over it and
/// call MPI, like every set-up in pmr) and then run any number of times:
///
///     pmr::Allreduce<double> norm(comm, 1, pmr::ReduceOp::sum);
///     norm[0] = local;  norm();                      // blocking: start() + wait()
///     norm[0] = local;  norm.start(); ...; norm.wait();
///
/// - Between start() and the completion of wait() (or test() returning true) the buffers belong to
///   pmr: do not read or write them. A separate input buffer is read by start() and is yours again
///   when start() returns.
/// - Every rank of the communicator runs its objects in the same order; an object must not be
///   started again before its previous run has completed on this rank.
/// - The steady state (start, test, wait) makes no MPI call: it runs on connections and windows
///   only, so it works on any provider. The constructor completes the set-up of the connections
///   and windows (with one run on scratch memory), so it waits for every rank to construct.
/// - Set-up compares the arguments of all ranks (element type, count, operation, root, algorithm,
///   order) and throws ArgumentError on every rank when they differ, instead of hanging later.
/// - Errors of a run are those of windows: Timeout after PMR_TIMEOUT, PeerLost when a peer dies.
///
/// Threading: an object is used by one thread at a time (see Connection).
#pragma once

#include <pmr/communicator.hpp>

#include <complex>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>

namespace pmr {

/// The reduction of an Allreduce. max and min are defined for the real types only; for float and
/// double they are IEEE 754-2019 maximum and minimum: NaN if any rank has a NaN, +0 above -0.
enum class ReduceOp : unsigned char { sum, max, min };

/// How an Allreduce moves its data.
enum class AllreduceAlgorithm : unsigned char {
    /// Chosen at set-up from the vector size and the number of ranks (see docs/collectives.md),
    /// unless PMR_ALLREDUCE_ALGORITHM names one of the others.
    automatic,
    /// log2(p) exchanges of the whole vector with partners at distance 1, 2, 4, ...; for p not a
    /// power of two the first 2r ranks (r = p - 2^floor(log2 p)) fold pairwise first and get the
    /// result back at the end. Best for small vectors.
    recursive_doubling,
    /// Reduce-scatter then allgather of p chunks around the ring of ranks: every rank sends about
    /// 2n(p-1)/p elements. Best for large vectors.
    ring,
    /// Trinaryx3-style (after the K computer's three-rail allreduce on a 3D torus): the vector is
    /// cut into three parts; part p runs ring reduce-scatters along the grid dimensions p, p+1,
    /// p+2 (mod 3), then ring allgathers back in reverse order, each part on its own rail, so that
    /// in every phase three rails carry data along three dimensions at once. Every rank sends
    /// about 2n(p-1)/(3p) elements per rail. Needs a 3D Cartesian communicator and connections
    /// with at least 3 rails (tofu with PMR_TOFU_TNIS >= 3, ucx with
    /// PMR_RAILS >= 3); otherwise the constructor throws ArgumentError on every rank. Never chosen
    /// automatically.
    trinaryx3,
    /// For ranks that share memory: every rank sends chunk c of p chunks to rank c, which folds
    /// the p chunks in rank order and sends the result to every rank (two steps, the sends and the
    /// final receives straight from and into the buffers, no staging copy); small vectors go whole
    /// to every rank in one step and every rank folds them in rank order. The result is that of
    /// ReductionOrder::rank in either order. Chosen automatically when all ranks (at most 16) run
    /// on one node and PMR_PROVIDER does not force a provider other than shm (on 2 ranks only
    /// above 8 KiB: below, recursive doubling is the same single exchange).
    direct,
};

/// The order in which an Allreduce combines the contributions of the ranks. In both orders every
/// rank gets bitwise the same result, and the same inputs on the same communicator with the same
/// algorithm give bitwise the same result in every run.
enum class ReductionOrder : unsigned char {
    /// The order of the algorithm (documented in docs/collectives.md): recursive doubling combines
    /// a balanced tree over the ranks, ring a chain per chunk starting at the chunk's rank, direct
    /// the rank order. Results of floating-point sums may differ between algorithms (and rank
    /// counts).
    algorithm,
    /// Left to right by rank, x_0 + x_1 + ... + x_{p-1}, whatever the algorithm: the result
    /// depends on the inputs and their ranks only. Costs more data movement (see
    /// docs/collectives.md).
    rank,
};

/// Choices of an Allreduce. The environment variables PMR_ALLREDUCE_ALGORITHM
/// (`recursive_doubling`/`rd`, `ring`, `trinaryx3`, `direct`, `automatic`) and PMR_ALLREDUCE_ORDER
/// (`algorithm`, `rank`) apply where these are left at their defaults.
struct AllreduceOptions {
    AllreduceAlgorithm algorithm = AllreduceAlgorithm::automatic;
    ReductionOrder order = ReductionOrder::algorithm;
};

std::string_view to_string(ReduceOp op) noexcept;
std::string_view to_string(AllreduceAlgorithm algorithm) noexcept;
std::string_view to_string(ReductionOrder order) noexcept;

namespace detail {

/// Element types of reductions, as the untyped core sees them.
enum class ElementKind : unsigned char { f32, f64, i32, i64, c32, c64, bytes };

template <class T>
constexpr ElementKind element_kind() noexcept {
    if constexpr (std::is_same_v<T, float>) {
        return ElementKind::f32;
    } else if constexpr (std::is_same_v<T, double>) {
        return ElementKind::f64;
    } else if constexpr (std::is_same_v<T, std::int32_t>) {
        return ElementKind::i32;
    } else if constexpr (std::is_same_v<T, std::int64_t>) {
        return ElementKind::i64;
    } else if constexpr (std::is_same_v<T, std::complex<float>>) {
        return ElementKind::c32;
    } else if constexpr (std::is_same_v<T, std::complex<double>>) {
        return ElementKind::c64;
    } else {
        return ElementKind::bytes;
    }
}

struct CollectiveState;

/// The untyped persistent collective of every public class (its state lives in the library).
class CollectiveCore {
public:
    CollectiveCore() noexcept;
    CollectiveCore(const CollectiveCore&) = delete;
    CollectiveCore& operator=(const CollectiveCore&) = delete;
    CollectiveCore(CollectiveCore&& other) noexcept;
    CollectiveCore& operator=(CollectiveCore&& other) noexcept;
    ~CollectiveCore();

    /// Allreduce of `count` elements; `in`/`out` null: library-owned buffer.
    static CollectiveCore allreduce(const Communicator& comm, ElementKind kind, std::size_t count,
                                    ReduceOp op, AllreduceOptions options, const void* in,
                                    void* out);
    static CollectiveCore barrier(const Communicator& comm);
    /// Broadcast of `bytes` bytes from `root`; `buffer` null: library-owned.
    static CollectiveCore broadcast(const Communicator& comm, std::size_t element_size,
                                    std::size_t count, int root, void* buffer);
    /// Allgather of `count` elements per rank into `count * size` elements; null: library-owned.
    static CollectiveCore allgather(const Communicator& comm, std::size_t element_size,
                                    std::size_t count, const void* in, void* out);

    void start();
    bool test();
    void wait();
    bool active() const noexcept;
    /// The result (and, for library-owned buffers, the input) buffer.
    void* data() const noexcept;
    /// Library-owned input of an Allgather (nullptr otherwise).
    void* input() const noexcept;
    AllreduceAlgorithm algorithm() const noexcept;
    ReductionOrder order() const noexcept;
    std::string describe() const;
    explicit operator bool() const noexcept { return state_ != nullptr; }

private:
    explicit CollectiveCore(std::unique_ptr<CollectiveState> state) noexcept;
    CollectiveState& checked() const;
    std::unique_ptr<CollectiveState> state_;
};

} // namespace detail

/// Operations shared by every persistent collective.
class Collective {
public:
    /// Starts a run; never waits for other ranks.
    /// @throws UsageError if the previous run has not completed or the object is empty; Timeout,
    ///         PeerLost when a peer is gone.
    void start() { core_.start(); }
    /// Non-blocking wait(): progresses the run and returns true once it has completed on this
    /// rank. @throws UsageError if not started; Timeout, PeerLost.
    bool test() { return core_.test(); }
    /// Waits until the run has completed on this rank. @throws as test().
    void wait() { core_.wait(); }
    /// start() and wait().
    void operator()() {
        core_.start();
        core_.wait();
    }
    /// Whether a run is in flight.
    bool active() const noexcept { return core_.active(); }
    /// Whether this object holds a collective (false when default-constructed or moved from).
    explicit operator bool() const noexcept { return static_cast<bool>(core_); }
    /// "allreduce of 4 x double (sum, recursive_doubling, order algorithm) on rank 0 of 4".
    std::string describe() const { return core_.describe(); }

protected:
    Collective() noexcept = default;
    explicit Collective(detail::CollectiveCore core) noexcept : core_(std::move(core)) {}
    detail::CollectiveCore core_; // NOLINT(misc-non-private-member-variables-in-classes)
};

/// Global reduction: after a run every rank holds op over the vectors of all ranks, bitwise the
/// same on every rank (see ReductionOrder). T is float, double, int32_t, int64_t,
/// std::complex<float> or std::complex<double>; integer sums wrap around.
template <class T>
class Allreduce : public Collective {
    static_assert(detail::element_kind<T>() != detail::ElementKind::bytes,
                  "pmr::Allreduce supports float, double, int32_t, int64_t, std::complex<float> "
                  "and std::complex<double>");

public:
    Allreduce() noexcept = default;
    /// In place over `count` elements of library-owned memory (data()): write the input there
    /// before start(), read the result after completion.
    /// @throws ArgumentError (max/min of complex numbers, unknown PMR_ALLREDUCE_* values,
    ///         arguments that differ between ranks, trinaryx3 without a 3D grid or 3 rails).
    Allreduce(const Communicator& comm, std::size_t count, ReduceOp op,
              AllreduceOptions options = {})
        : Collective(detail::CollectiveCore::allreduce(comm, detail::element_kind<T>(), count, op,
                                                       options, nullptr, nullptr)) {}
    /// In place over the user buffer [inout, inout + count), which must outlive the object.
    Allreduce(const Communicator& comm, T* inout, std::size_t count, ReduceOp op,
              AllreduceOptions options = {})
        : Collective(detail::CollectiveCore::allreduce(comm, detail::element_kind<T>(), count, op,
                                                       options, inout, inout)) {}
    /// From the user buffer `in` (read by start()) into the user buffer `out` (written by the
    /// run); `in == out` is the in-place form.
    Allreduce(const Communicator& comm, const T* in, T* out, std::size_t count, ReduceOp op,
              AllreduceOptions options = {})
        : Collective(detail::CollectiveCore::allreduce(comm, detail::element_kind<T>(), count, op,
                                                       options, in, out)) {}

    /// The result buffer (library-owned or the user's `out`).
    T* data() noexcept { return static_cast<T*>(core_.data()); }
    const T* data() const noexcept { return static_cast<const T*>(core_.data()); }
    T& operator[](std::size_t i) noexcept { return data()[i]; }
    /// The algorithm chosen at set-up.
    AllreduceAlgorithm algorithm() const noexcept { return core_.algorithm(); }
    ReductionOrder order() const noexcept { return core_.order(); }
};

/// Waits until every rank of the communicator has started the barrier: one step of one-byte
/// messages to and from every rank when the ranks share a node (up to 16 of them), else a
/// dissemination barrier (ceil(log2 p) steps).
class Barrier : public Collective {
public:
    Barrier() noexcept = default;
    explicit Barrier(const Communicator& comm)
        : Collective(detail::CollectiveCore::barrier(comm)) {}
};

/// Copies `count` elements of the root's buffer to every rank (binomial tree).
template <class T>
class Broadcast : public Collective {
    static_assert(std::is_trivially_copyable_v<T>, "pmr::Broadcast moves raw bytes");

public:
    Broadcast() noexcept = default;
    /// Over library-owned memory (data()).
    /// @throws ArgumentError for a root outside the communicator or arguments that differ.
    Broadcast(const Communicator& comm, std::size_t count, int root)
        : Collective(detail::CollectiveCore::broadcast(comm, sizeof(T), count, root, nullptr)) {}
    /// Over the user buffer [buffer, buffer + count).
    Broadcast(const Communicator& comm, T* buffer, std::size_t count, int root)
        : Collective(detail::CollectiveCore::broadcast(comm, sizeof(T), count, root, buffer)) {}

    T* data() noexcept { return static_cast<T*>(core_.data()); }
    T& operator[](std::size_t i) noexcept { return data()[i]; }
};

/// Every rank contributes `count` elements; after a run every rank holds the `count * size`
/// elements of all ranks in rank order.
template <class T>
class Allgather : public Collective {
    static_assert(std::is_trivially_copyable_v<T>, "pmr::Allgather moves raw bytes");

public:
    Allgather() noexcept = default;
    /// Library-owned: write the contribution to input() (count elements), read data()
    /// (count * size elements) after completion.
    Allgather(const Communicator& comm, std::size_t count)
        : Collective(detail::CollectiveCore::allgather(comm, sizeof(T), count, nullptr, nullptr)) {}
    /// User buffers: `in` (count elements, read by start()) and `out` (count * size elements).
    Allgather(const Communicator& comm, const T* in, T* out, std::size_t count)
        : Collective(detail::CollectiveCore::allgather(comm, sizeof(T), count, in, out)) {}

    T* input() noexcept { return static_cast<T*>(core_.input()); }
    T* data() noexcept { return static_cast<T*>(core_.data()); }
    T& operator[](std::size_t i) noexcept { return data()[i]; }
};

} // namespace pmr
