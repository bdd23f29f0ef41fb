// SPDX-License-Identifier: MIT
/// @file neighbor.hpp
/// A persistent neighbour exchange that spreads its messages over all rails of its connections
/// (Morie & Nanri's multi-NIC neighbour algorithm), built on pmr's windows only.
///
///     pmr::Communicator cart(MPI_COMM_WORLD, {0, 0, 0}, {true, true, true});
///     pmr::NeighborExchange<double> halo(cart, face_elements); // both neighbours per dimension
///     for (;;) {
///         pack(halo.send(i)) for every neighbour i;
///         halo.start();               // send buffers are pmr's until wait() returns,
///         halo.wait();                // receive buffers are pmr's between start() and wait()
///         unpack(halo.recv(i)) for every neighbour i;
///     }
///
/// Set-up (the constructors) is collective over the neighbours and may call MPI; start(), wait()
/// and test() never do. Threading: one thread at a time per exchange, as for windows.
#pragma once

#include <pmr/communicator.hpp>
#include <pmr/error.hpp>
#include <pmr/window.hpp>

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace pmr {

/// How the messages of a neighbour exchange use the rails of their connections.
enum class NeighborAlgorithm : unsigned char {
    /// Message i whole, on rail i mod n (the "native" exchange).
    direct,
    /// Every message cut into one fragment per rail, the fragments sent in the steps of Morie &
    /// Nanri so that every rail carries 1/n of every message and all rails are busy in every step.
    split,
    /// Per message: split from the crossover size on, direct below it.
    automatic,
};

/// "direct", "split" or "automatic".
std::string_view to_string(NeighborAlgorithm algorithm) noexcept;
/// The algorithm of that name ("auto" is accepted for automatic), or nothing.
std::optional<NeighborAlgorithm> neighbor_algorithm_from_string(std::string_view name) noexcept;

/// Settings of a NeighborExchange. Both ends of every neighbour connection must agree on the
/// algorithm (construction throws ArgumentError otherwise); for the sizes the larger value of the
/// two ends is used.
struct NeighborOptions {
    /// The algorithm; left automatic, the environment variable `PMR_NEIGHBOR_ALGORITHM`
    /// (direct, split, auto) may choose another (a value in code wins: pmr/settings.hpp).
    NeighborAlgorithm algorithm = NeighborAlgorithm::automatic;
    /// automatic: messages of at least this many bytes are split. 0: `PMR_NEIGHBOR_CROSSOVER`
    /// (bytes, suffixes K and M allowed), else the calibration (below), else a default per
    /// provider.
    std::size_t crossover_bytes = 0;
    /// automatic without a crossover: time a few rounds of direct and of split at construction
    /// (over the exchange's own windows, so the trial moves whatever the buffers hold and writes
    /// the receive buffers) and take the faster for every message that can be split; all ranks
    /// connected through neighbours agree on the choice (the slowest rank's times decide). Costs
    /// (communicator size - 1) rounds of 16 bytes at set-up and, if some rank has a message to
    /// split, 14 rounds of the exchange and as many small rounds again.
    /// `PMR_NEIGHBOR_CALIBRATE=0` turns it off like false here. Every rank must give the same.
    bool calibrate = true;
    /// split and automatic: no fragment is made smaller than this; a message that cannot give
    /// every rail a fragment this large is cut into fewer fragments. 0:
    /// `PMR_NEIGHBOR_MIN_FRAGMENT`, else a default per provider.
    std::size_t min_fragment_bytes = 0;
    /// Added to the tags of the exchange's connections, to keep several exchanges between the same
    /// ranks apart (they also pair in creation order).
    int tag_offset = 0;
};

/// One neighbour of an explicit neighbour list. The neighbour must list this rank with the
/// counts swapped and the tags swapped; several entries for the same rank pair in order.
/// `MPI_PROC_NULL` is a neighbour that exchanges nothing.
struct Neighbor {
    int rank = MPI_PROC_NULL;
    std::size_t send_count = 0; ///< elements sent to the neighbour
    std::size_t recv_count = 0; ///< elements received from it
    int send_tag = 0;
    int recv_tag = 0;
};

/// Elements of one neighbour's buffer: a pointer and a count (std::span before C++20).
template <class T>
struct NeighborBuffer {
    T* pointer = nullptr;
    std::size_t count = 0;

    T* data() const noexcept { return pointer; }
    std::size_t size() const noexcept { return count; }
    bool empty() const noexcept { return count == 0; }
    T* begin() const noexcept { return pointer; }
    T* end() const noexcept { return pointer + count; }
    T& operator[](std::size_t i) const noexcept { return pointer[i]; }
};

namespace detail {

/// The untyped exchange (src/collectives/neighbor.cpp).
class NeighborCore {
public:
    /// `send` and `recv`: one user buffer per neighbour, or empty for library-owned buffers.
    NeighborCore(const Communicator& comm, const std::vector<Neighbor>& neighbors,
                 std::size_t element_size, const std::vector<void*>& send,
                 const std::vector<void*>& recv, const NeighborOptions& options);
    NeighborCore(const NeighborCore&) = delete;
    NeighborCore& operator=(const NeighborCore&) = delete;
    NeighborCore(NeighborCore&&) noexcept;
    NeighborCore& operator=(NeighborCore&&) noexcept;
    ~NeighborCore();

    void start();
    void wait();
    bool test();

    std::size_t size() const noexcept;
    std::byte* send_data(std::size_t neighbor) const;
    std::byte* recv_data(std::size_t neighbor) const;
    const Neighbor& neighbor(std::size_t neighbor) const;
    NeighborAlgorithm algorithm() const noexcept;
    NeighborAlgorithm algorithm(std::size_t neighbor) const;
    std::size_t fragments(std::size_t neighbor) const;
    std::size_t rails() const noexcept;
    std::size_t steps() const noexcept;
    std::size_t crossover_bytes() const noexcept;
    std::string describe() const;

private:
    struct State;
    std::unique_ptr<State> state_;
};

/// The split schedule of Morie & Nanri for `messages` messages and `rails` rails:
/// schedule[step][rail] lists the messages whose fragment that rail carries in that step (see
/// neighbor.cpp for the reasoning).
std::vector<std::vector<std::vector<std::size_t>>> split_schedule(std::size_t messages,
                                                                  std::size_t rails);

/// Both neighbours of every dimension of `cart`, in the order (0, -1), (0, +1), (1, -1), ...
std::vector<Neighbor> cartesian_neighbors(const Communicator& cart,
                                          const std::vector<std::size_t>& counts, int tag_offset);

} // namespace detail

/// A persistent exchange with a fixed set of neighbours: every round sends one message to each
/// neighbour and receives one from each, over windows registered once.
///
/// State machine: start() -> wait() (or test() until true) -> start() ... Between start() and the
/// end of wait() the send buffers must not be written and the receive buffers must not be touched;
/// before start() and after wait() both are yours. A receive buffer of a null neighbour (open
/// border) is never written.
///
/// Buffers: library-owned (send(i) and recv(i) point into pmr memory that every provider reaches by
/// its fastest path) or the user's (given at construction; they must outlive the exchange).
///
/// Results do not depend on the algorithm: every algorithm moves the same bytes into the same
/// places. On connections with one rail (self, shm) every algorithm is direct.
template <class T>
class NeighborExchange {
    static_assert(std::is_trivially_copyable_v<T>,
                  "pmr moves raw bytes: the element type must be trivially copyable");

public:
    /// Index of the neighbour in `dimension` and `direction` (-1 or +1) of a Cartesian exchange.
    static constexpr std::size_t index(int dimension, int direction) noexcept {
        return 2 * static_cast<std::size_t>(dimension) + (direction > 0 ? 1 : 0);
    }

    /// Both neighbours of every dimension of the Cartesian `cart`, `count` elements each way;
    /// neighbour index(d, dir) is the one of cart.target(d, dir) (same rules for extents 1 and 2
    /// and open borders). Library-owned buffers. Collective over `cart`.
    /// @throws UsageError if `cart` has no grid; SizeError, ArgumentError if a neighbour disagrees
    ///         (counts, element size, algorithm); Timeout, PeerLost, ProviderError as windows.
    NeighborExchange(const Communicator& cart, std::size_t count, NeighborOptions options = {})
        : NeighborExchange(
              cart,
              std::vector<std::size_t>(2 * static_cast<std::size_t>(cart.dimensions()), count),
              options) {}
    /// Same with one count per neighbour index (2 * dimensions entries), the elements sent to that
    /// neighbour; every rank gives the same list, so the message from the neighbour in direction
    /// `dir` has the count of direction `-dir`.
    NeighborExchange(const Communicator& cart, const std::vector<std::size_t>& counts,
                     NeighborOptions options = {})
        : NeighborExchange(cart, detail::cartesian_neighbors(cart, counts, options.tag_offset),
                           options) {}
    /// Same over the user's buffers: send[i] and recv[i] hold `count` elements each.
    NeighborExchange(const Communicator& cart, std::size_t count, const std::vector<T*>& send,
                     const std::vector<T*>& recv, NeighborOptions options = {})
        : NeighborExchange(
              cart,
              detail::cartesian_neighbors(
                  cart,
                  std::vector<std::size_t>(2 * static_cast<std::size_t>(cart.dimensions()), count),
                  options.tag_offset),
              send, recv, options) {}
    /// An explicit neighbour list, library-owned buffers.
    NeighborExchange(const Communicator& comm, const std::vector<Neighbor>& neighbors,
                     NeighborOptions options = {})
        : core_(comm, neighbors, sizeof(T), {}, {}, options) {}
    /// An explicit neighbour list over the user's buffers (one per neighbour and side, holding
    /// its send_count or recv_count elements).
    /// @throws ArgumentError if the buffer lists do not have one entry per neighbour.
    NeighborExchange(const Communicator& comm, const std::vector<Neighbor>& neighbors,
                     const std::vector<T*>& send, const std::vector<T*>& recv,
                     NeighborOptions options = {})
        : core_(comm, neighbors, sizeof(T), {send.begin(), send.end()}, {recv.begin(), recv.end()},
                options) {}

    /// Starts a round: posts every receive and every send. @throws UsageError if a round is
    /// running; SizeError, ArgumentError, Timeout, PeerLost as windows.
    void start() { core_.start(); }
    /// Waits until every message of the round has been sent and received.
    /// @throws UsageError if no round is running; Timeout, PeerLost. After a Timeout the round
    /// is still running: wait() or test() again wait for the messages not yet complete.
    void wait() { core_.wait(); }
    /// Non-blocking wait(): true once the round has completed. @throws as wait().
    bool test() { return core_.test(); }

    /// Number of neighbours (null ones included).
    std::size_t size() const noexcept { return core_.size(); }
    /// Buffer of the message to neighbour i. @throws ArgumentError for a bad index.
    NeighborBuffer<T> send(std::size_t i) const {
        return {reinterpret_cast<T*>(core_.send_data(i)), core_.neighbor(i).send_count};
    }
    /// Buffer of the message from neighbour i. @throws ArgumentError for a bad index.
    NeighborBuffer<T> recv(std::size_t i) const {
        return {reinterpret_cast<T*>(core_.recv_data(i)), core_.neighbor(i).recv_count};
    }
    /// Rank of neighbour i (MPI_PROC_NULL for none).
    int neighbor_rank(std::size_t i) const { return core_.neighbor(i).rank; }

    /// The algorithm chosen for the exchange (after PMR_NEIGHBOR_ALGORITHM).
    NeighborAlgorithm algorithm() const noexcept { return core_.algorithm(); }
    /// What neighbour i's message uses: direct or split (automatic decided).
    NeighborAlgorithm algorithm(std::size_t i) const { return core_.algorithm(i); }
    /// Fragments of the message to neighbour i (1 when direct).
    std::size_t fragments(std::size_t i) const { return core_.fragments(i); }
    /// Largest rail count of the exchange's connections.
    std::size_t rails() const noexcept { return core_.rails(); }
    /// Steps of the split schedule (0 if nothing is split).
    std::size_t steps() const noexcept { return core_.steps(); }
    /// Crossover of automatic in bytes, as agreed with the neighbours; after a calibration 0 if it
    /// chose split (every message that can be split is) and SIZE_MAX if it chose direct.
    std::size_t crossover_bytes() const noexcept { return core_.crossover_bytes(); }
    /// Summary for logs: neighbours, rails, algorithm per message.
    std::string describe() const { return core_.describe(); }

private:
    detail::NeighborCore core_;
};

} // namespace pmr
