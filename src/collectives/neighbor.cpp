// SPDX-License-Identifier: MIT
// The persistent neighbour exchange (include/pmr/neighbor.hpp), built on pmr's public windows and
// their multi-rail posts only: no provider code, no MPI.
//
// Set-up, per neighbour: one library connection, a header window pair that exchanges once what
// both ends intend (element size, counts, algorithm, rails, sizes), then the data windows. A
// message sent whole is one window; a split message is one window per fragment, each a window
// over its slice of the neighbour's buffer, so that the order of the posts (the schedule) decides
// what every rail carries in every step. Both ends derive the fragments of a message from the
// same agreed numbers, so the k-th send window of one end always pairs with the k-th receive
// window of the other.
#include <pmr/memory.hpp>
#include <pmr/neighbor.hpp>
#include <pmr/target.hpp>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <sstream>
#include <thread>

namespace pmr {

std::string_view to_string(NeighborAlgorithm algorithm) noexcept {
    switch (algorithm) {
    case NeighborAlgorithm::direct:
        return "direct";
    case NeighborAlgorithm::split:
        return "split";
    case NeighborAlgorithm::automatic:
        return "automatic";
    }
    return "unknown";
}

std::optional<NeighborAlgorithm> neighbor_algorithm_from_string(std::string_view name) noexcept {
    if (name == "direct") {
        return NeighborAlgorithm::direct;
    }
    if (name == "split") {
        return NeighborAlgorithm::split;
    }
    if (name == "automatic" || name == "auto") {
        return NeighborAlgorithm::automatic;
    }
    return std::nullopt;
}

namespace detail {

namespace {

constexpr std::uint64_t header_magic = 0x706d722d6e626801; // "pmr-nbh" and a version
constexpr std::size_t header_words = 8;
constexpr std::size_t buffer_alignment = 64;

/// Defaults when neither the options nor the environment name a size. UCX stripes its own
/// rendezvous transfers only in pieces of 16 KiB and up: smaller fragments cost more in per-put
/// overhead than a second rail wins; on shaped 100 Mbit/s veth rails (scripts/netns-rails.sh)
/// split lost at 64 KiB and won from 256 KiB, hence the crossover of 128 KiB. Providers with RDMA
/// engines per rail (Tofu's TNIs) split far smaller messages profitably (the seed's crossover is
/// 4 KiB).
struct SizeDefaults {
    std::size_t crossover;
    std::size_t min_fragment;
};

SizeDefaults size_defaults(Provider provider) {
    if (to_string(provider) == "ucx") {
        return {std::size_t{128} << 10, std::size_t{16} << 10};
    }
    return {std::size_t{4} << 10, std::size_t{1} << 10};
}

std::string where(int rank, std::size_t index, int peer) {
    return "neighbour exchange on rank " + std::to_string(rank) + ", neighbour " +
           std::to_string(index) + " (rank " + std::to_string(peer) + ")";
}

/// A size in bytes from the environment: digits and an optional K, M or G (powers of 1024).
std::optional<std::size_t> environment_bytes(const char* name) {
    const char* text = std::getenv(name);
    if (text == nullptr || *text == '\0') {
        return std::nullopt;
    }
    char* end = nullptr;
    const unsigned long long value = std::strtoull(text, &end, 10);
    std::size_t shift = 0;
    if (end != text && *end != '\0' && end[1] == '\0') {
        switch (std::toupper(static_cast<unsigned char>(*end))) {
        case 'K':
            shift = 10;
            ++end;
            break;
        case 'M':
            shift = 20;
            ++end;
            break;
        case 'G':
            shift = 30;
            ++end;
            break;
        default:
            break;
        }
    }
    if (end == text || *end != '\0' || *text == '-') {
        throw ArgumentError(std::string("pmr: ") + name + "=\"" + text +
                            "\" is not a size in bytes; give a number with an optional K, M or G "
                            "suffix, e.g. 64K");
    }
    return static_cast<std::size_t>(value) << shift;
}

NeighborAlgorithm chosen_algorithm(NeighborAlgorithm requested) {
    const char* text = std::getenv("PMR_NEIGHBOR_ALGORITHM");
    if (text == nullptr || *text == '\0') {
        return requested;
    }
    if (auto algorithm = neighbor_algorithm_from_string(text)) {
        return *algorithm;
    }
    throw ArgumentError(std::string("pmr: PMR_NEIGHBOR_ALGORITHM=\"") + text +
                        "\" is not a neighbour algorithm; use direct, split or auto");
}

/// First element of fragment `f` of `count` elements cut into `parts` nearly equal fragments.
std::size_t fragment_begin(std::size_t count, std::size_t parts, std::size_t f) {
    return count / parts * f + std::min(f, count % parts);
}

} // namespace

/// One neighbour with a peer (not MPI_PROC_NULL).
struct NeighborLink {
    std::size_t index = 0; // in the neighbour list
    Connection connection;
    SendWindow<std::uint64_t> header_send;
    RecvWindow<std::uint64_t> header_recv;
    std::size_t rails = 1;          // agreed by both ends
    std::size_t crossover = 0;      // agreed
    std::size_t min_fragment = 0;   // agreed
    std::size_t send_fragments = 0; // 0 for an empty message, 1 when sent whole
    std::size_t recv_fragments = 0; // as the peer sends it
    std::vector<SendWindow<unsigned char>> sends;
    std::vector<RecvWindow<unsigned char>> recvs;
};

/// One post of a round, in schedule order.
struct NeighborPost {
    SendWindow<unsigned char>* window;
    RailRange range;
    bool multi_rail;
};

struct NeighborCore::State {
    int rank = 0;
    std::vector<Neighbor> neighbors;
    std::size_t element_size = 1;
    NeighborAlgorithm algorithm = NeighborAlgorithm::automatic;
    std::vector<std::byte*> send;
    std::vector<std::byte*> recv;
    bool owned = false; // library-owned buffers
    std::byte* owned_send = nullptr;
    std::byte* owned_recv = nullptr;
    std::vector<NeighborLink> links;
    std::vector<std::size_t> link_of; // neighbour index -> link, or npos
    std::vector<NeighborPost> posts;
    std::vector<Waitable> waitables;
    std::vector<unsigned char> finished; // per waitable, in the running round (test())
    std::size_t unfinished = 0;
    std::size_t rails = 1;
    std::size_t steps = 0;
    bool running = false;

    ~State() {
        // Windows first: they refer to the owned memory.
        links.clear();
        deallocate_bytes(owned_send);
        deallocate_bytes(owned_recv);
    }

    /// Fragments of a message of `bytes` bytes on `link`: 0 if empty, 1 if sent whole.
    std::size_t fragments_of(const NeighborLink& link, std::size_t bytes) const {
        if (bytes == 0) {
            return 0;
        }
        if (algorithm == NeighborAlgorithm::direct || link.rails <= 1 ||
            (algorithm == NeighborAlgorithm::automatic && bytes < link.crossover)) {
            return 1;
        }
        const std::size_t elements = bytes / element_size;
        const std::size_t by_size =
            std::max<std::size_t>(1, bytes / std::max<std::size_t>(1, link.min_fragment));
        return std::max<std::size_t>(1, std::min({link.rails, by_size, elements}));
    }

    std::string here(const NeighborLink& link) const {
        return where(rank, link.index, neighbors[link.index].rank);
    }

    void allocate_owned();
    void exchange_headers(const NeighborOptions& options);
    void make_windows();
    void schedule();
    void prime();

    // Every unfinished window is tested on every call, and each completes on its own: test_all()
    // stops polling at the first unfinished window, and over a provider whose polling is what
    // moves a connection's traffic (UCX over TCP), two ranks would each poll only the window that
    // waits for the other's unpolled one.
    bool poll_unfinished() {
        for (std::size_t i = 0; i < waitables.size(); ++i) {
            if (finished[i] == 0) {
                const Waitable& w = waitables[i];
                finished[i] = (w.send != nullptr ? w.send->test() : w.recv->test()) ? 1 : 0;
                unfinished -= finished[i];
            }
        }
        return unfinished == 0;
    }
};

// One round of empty posts completes the set-up of every data window now (the first init() of a
// window waits for its peer's): start() then never waits for set-up, and no window is left
// unused if the exchange is destroyed before its first round. Empty posts move no bytes, so the
// receive buffers are not touched.
void NeighborCore::State::prime() {
    for (NeighborLink& link : links) {
        for (auto& w : link.recvs) {
            w.init();
        }
        for (auto& w : link.sends) {
            w.init();
            w.post(std::size_t{0});
        }
        for (auto& w : link.recvs) {
            w.post();
        }
    }
    wait_all(waitables.data(), waitables.size());
    finished.assign(waitables.size(), 0);
}

// Library-owned buffers: a message sent whole lives in its window's own memory (the fastest path
// of every provider, and no cost over hand-written owned windows); split messages and null
// neighbours get slices of one pmr allocation per side, the fragments' windows lying over them.
void NeighborCore::State::allocate_owned() {
    auto layout = [&](auto count_of, auto whole, std::byte*& memory,
                      std::vector<std::byte*>& pointers) {
        std::size_t total = 0;
        std::vector<std::size_t> offsets;
        for (std::size_t i = 0; i < neighbors.size(); ++i) {
            offsets.push_back(total);
            if (!whole(i)) {
                const std::size_t bytes = checked_bytes(count_of(neighbors[i]), element_size);
                total += (bytes + buffer_alignment - 1) / buffer_alignment * buffer_alignment;
            }
        }
        memory = static_cast<std::byte*>(allocate_bytes(std::max<std::size_t>(total, 1)));
        pointers.clear();
        for (std::size_t offset : offsets) {
            pointers.push_back(memory + offset);
        }
    };
    const auto link_at = [&](std::size_t i) -> const NeighborLink* {
        return link_of[i] == static_cast<std::size_t>(-1) ? nullptr : &links[link_of[i]];
    };
    layout([](const Neighbor& n) { return n.send_count; },
           [&](std::size_t i) { return link_at(i) != nullptr && link_at(i)->send_fragments == 1; },
           owned_send, send);
    layout([](const Neighbor& n) { return n.recv_count; },
           [&](std::size_t i) { return link_at(i) != nullptr && link_at(i)->recv_fragments == 1; },
           owned_recv, recv);
}

void NeighborCore::State::exchange_headers(const NeighborOptions& options) {
    const std::optional<std::size_t> crossover_env = environment_bytes("PMR_NEIGHBOR_CROSSOVER");
    const std::optional<std::size_t> fragment_env = environment_bytes("PMR_NEIGHBOR_MIN_FRAGMENT");
    // Every connection exists on every rank by now, so each handshake completes. Then every window
    // is created before any is first used: the first init() of a window waits for the peer's
    // matching window, which the peer may create only after its own windows to other neighbours.
    for (NeighborLink& link : links) {
        link.connection.establish();
        link.header_send = SendWindow<std::uint64_t>(link.connection, header_words);
        link.header_recv = RecvWindow<std::uint64_t>(link.connection, header_words);
    }
    std::vector<Waitable> list;
    for (NeighborLink& link : links) {
        const Neighbor& n = neighbors[link.index];
        const SizeDefaults defaults = size_defaults(link.connection.provider());
        link.rails = link.connection.rails();
        link.crossover = options.crossover_bytes != 0 ? options.crossover_bytes
                                                      : crossover_env.value_or(defaults.crossover);
        link.min_fragment = options.min_fragment_bytes != 0
                                ? options.min_fragment_bytes
                                : fragment_env.value_or(defaults.min_fragment);
        const std::uint64_t mine[header_words] = {header_magic,
                                                  element_size,
                                                  n.send_count * element_size,
                                                  n.recv_count * element_size,
                                                  static_cast<std::uint64_t>(algorithm),
                                                  link.crossover,
                                                  link.min_fragment,
                                                  link.rails};
        std::copy(std::begin(mine), std::end(mine), link.header_send.data());
        link.header_recv.init();
        link.header_send.init();
        link.header_send.post();
        link.header_recv.post();
        list.push_back(waitable(link.header_send));
        list.push_back(waitable(link.header_recv));
    }
    wait_all(list.data(), list.size());

    for (NeighborLink& link : links) {
        const Neighbor& n = neighbors[link.index];
        const std::uint64_t* peer = link.header_recv.data();
        const std::string at = here(link);
        if (link.header_recv.received_bytes() != header_words * sizeof(std::uint64_t) ||
            peer[0] != header_magic) {
            throw ArgumentError("pmr: " + at +
                                ": the peer's connection is not a neighbour exchange of this "
                                "pmr version; create the same exchanges in the same order on "
                                "both ranks");
        }
        if (peer[1] != element_size) {
            throw ArgumentError("pmr: " + at + ": elements of " + std::to_string(element_size) +
                                " bytes here, " + std::to_string(peer[1]) +
                                " bytes on the peer; both must use the same element type");
        }
        const auto bytes_text = [&](std::uint64_t bytes) {
            return std::to_string(bytes / element_size) + " elements";
        };
        if (peer[2] != n.recv_count * element_size) {
            throw SizeError("pmr: " + at + ": expects " + bytes_text(n.recv_count * element_size) +
                            " from the peer, which sends " + bytes_text(peer[2]) +
                            "; the recv count here must equal the send count there");
        }
        if (peer[3] != n.send_count * element_size) {
            throw SizeError("pmr: " + at + ": sends " + bytes_text(n.send_count * element_size) +
                            " to the peer, which expects " + bytes_text(peer[3]) +
                            "; the send count here must equal the recv count there");
        }
        if (peer[4] != static_cast<std::uint64_t>(algorithm)) {
            throw ArgumentError(
                "pmr: " + at + ": algorithm " + std::string(to_string(algorithm)) + " here, " +
                std::string(to_string(static_cast<NeighborAlgorithm>(peer[4]))) +
                " on the peer; give every rank the same options and PMR_NEIGHBOR_ALGORITHM");
        }
        link.crossover = std::max<std::size_t>(link.crossover, peer[5]);
        link.min_fragment = std::max<std::size_t>(link.min_fragment, peer[6]);
        link.rails = std::max<std::size_t>(1, std::min<std::size_t>(link.rails, peer[7]));
    }
}

void NeighborCore::State::make_windows() {
    for (NeighborLink& link : links) {
        const Neighbor& n = neighbors[link.index];
        link.send_fragments = fragments_of(link, n.send_count * element_size);
        link.recv_fragments = fragments_of(link, n.recv_count * element_size);
    }
    if (owned) {
        allocate_owned();
    }
    for (NeighborLink& link : links) {
        const Neighbor& n = neighbors[link.index];
        if (owned && link.send_fragments == 1) {
            link.sends.emplace_back(link.connection, n.send_count * element_size);
            send[link.index] = reinterpret_cast<std::byte*>(link.sends.back().data());
        }
        if (owned && link.recv_fragments == 1) {
            link.recvs.emplace_back(link.connection, n.recv_count * element_size);
            recv[link.index] = reinterpret_cast<std::byte*>(link.recvs.back().data());
        }
        link.sends.reserve(link.send_fragments);
        for (std::size_t f = link.sends.size(); f < link.send_fragments; ++f) {
            const std::size_t first = fragment_begin(n.send_count, link.send_fragments, f);
            const std::size_t last = fragment_begin(n.send_count, link.send_fragments, f + 1);
            link.sends.emplace_back(link.connection,
                                    reinterpret_cast<unsigned char*>(send[link.index]) +
                                        first * element_size,
                                    (last - first) * element_size);
        }
        link.recvs.reserve(link.recv_fragments);
        for (std::size_t f = link.recvs.size(); f < link.recv_fragments; ++f) {
            const std::size_t first = fragment_begin(n.recv_count, link.recv_fragments, f);
            const std::size_t last = fragment_begin(n.recv_count, link.recv_fragments, f + 1);
            link.recvs.emplace_back(link.connection,
                                    reinterpret_cast<unsigned char*>(recv[link.index]) +
                                        first * element_size,
                                    (last - first) * element_size);
        }
    }
}

// The schedule of the posts (Morie & Nanri). With m split messages and n rails, every message is
// cut into n fragments and every rail carries one fragment of every message: 1/n of each, m/n
// messages' worth per rail, the least any schedule can give the busiest rail. The order decides
// what the rails do at the same time: if m/n reduces by d = gcd(m, n), the messages form m/d groups
// of d, and in step s rail k carries its fragments of group (s + k) mod (m/d). Every step then
// moves d/n messages' worth per rail on every rail, and the rails of a step serve different
// neighbours (different links) instead of all queueing on the same one.
//
// Example: 6 neighbours (a 3D grid), 4 rails. 6/4 reduces by d = 2 to 3/2: three groups {0,1},
// {2,3}, {4,5} and 6/2 = 3 steps. Step 0: rail 0 sends its quarters of messages 0 and 1, rail 1
// of 2 and 3, rail 2 of 4 and 5, rail 3 of 0 and 1; step 1 shifts every rail to the next group,
// step 2 once more. After 3 steps every rail has sent a quarter of all 6 messages (1.5 messages
// each, against 2 on the busiest rail when messages go whole on rail i mod 4).
//
// Fragment f of message j goes on rail (f + j) mod n: the seed's "fragment k on NIC k" rotated per
// message, which keeps the rails balanced also when a message has fewer than n fragments (too
// small to give every rail the minimum fragment). Messages sent whole go first, on rail
// (q mod n) for the q-th of them.
std::vector<std::vector<std::vector<std::size_t>>> split_schedule(std::size_t messages,
                                                                  std::size_t rails) {
    if (messages == 0 || rails == 0) {
        return {};
    }
    const std::size_t d = std::gcd(messages, rails);
    const std::size_t steps = messages / d;
    std::vector<std::vector<std::vector<std::size_t>>> schedule(
        steps, std::vector<std::vector<std::size_t>>(rails));
    for (std::size_t s = 0; s < steps; ++s) {
        for (std::size_t k = 0; k < rails; ++k) {
            const std::size_t group = (s + k) % steps;
            for (std::size_t j = group * d; j < group * d + d; ++j) {
                schedule[s][k].push_back(j);
            }
        }
    }
    return schedule;
}

void NeighborCore::State::schedule() {
    posts.clear();
    std::vector<NeighborLink*> split;
    std::size_t whole = 0;
    for (NeighborLink& link : links) {
        if (link.send_fragments == 1) {
            const std::size_t rail = link.rails > 1 ? whole++ % link.rails : 0;
            posts.push_back(
                {&link.sends[0], RailRange{0, link.sends[0].bytes(), rail}, link.rails > 1});
        } else if (link.send_fragments > 1) {
            split.push_back(&link);
        }
    }
    std::size_t n = 1;
    for (const NeighborLink* link : split) {
        n = std::max(n, link->rails);
    }
    const auto plan = split_schedule(split.size(), n);
    steps = plan.size();
    for (const auto& step : plan) {
        for (std::size_t k = 0; k < n; ++k) {
            for (std::size_t j : step[k]) {
                NeighborLink& link = *split[j];
                const std::size_t f = (k + n - j % n) % n; // rail k = (f + j) mod n
                if (f < link.send_fragments) {
                    SendWindow<unsigned char>& w = link.sends[f];
                    posts.push_back({&w, RailRange{0, w.bytes(), k % link.rails}, true});
                }
            }
        }
    }
    waitables.clear();
    for (NeighborLink& link : links) {
        for (auto& w : link.sends) {
            waitables.push_back(waitable(w));
        }
        for (auto& w : link.recvs) {
            waitables.push_back(waitable(w));
        }
    }
}

NeighborCore::NeighborCore(const Communicator& comm, const std::vector<Neighbor>& neighbors,
                           std::size_t element_size, const std::vector<void*>& send,
                           const std::vector<void*>& recv, const NeighborOptions& options)
    : state_(std::make_unique<State>()) {
    State& s = *state_;
    s.rank = comm.rank();
    s.neighbors = neighbors;
    s.element_size = element_size;
    s.algorithm = chosen_algorithm(options.algorithm);
    const std::string self = "pmr: neighbour exchange on rank " + std::to_string(s.rank);
    if (send.empty() && recv.empty()) {
        s.owned = true; // allocated once the fragments are known (make_windows)
        s.send.assign(neighbors.size(), nullptr);
        s.recv.assign(neighbors.size(), nullptr);
    } else {
        if (send.size() != neighbors.size() || recv.size() != neighbors.size()) {
            throw ArgumentError(self + ": " + std::to_string(neighbors.size()) +
                                " neighbours but " + std::to_string(send.size()) + " send and " +
                                std::to_string(recv.size()) +
                                " receive buffers; give one buffer per neighbour and side");
        }
        for (std::size_t i = 0; i < neighbors.size(); ++i) {
            if ((send[i] == nullptr && neighbors[i].send_count > 0) ||
                (recv[i] == nullptr && neighbors[i].recv_count > 0)) {
                throw ArgumentError(self + ": null buffer for neighbour " + std::to_string(i) +
                                    " with a count above 0");
            }
            s.send.push_back(static_cast<std::byte*>(send[i]));
            s.recv.push_back(static_cast<std::byte*>(recv[i]));
        }
    }
    s.link_of.assign(neighbors.size(), static_cast<std::size_t>(-1));
    s.links.reserve(neighbors.size());
    for (std::size_t i = 0; i < neighbors.size(); ++i) {
        const Neighbor& n = neighbors[i];
        if (n.rank == MPI_PROC_NULL) {
            continue;
        }
        s.link_of[i] = s.links.size();
        NeighborLink& link = s.links.emplace_back();
        link.index = i;
        link.connection = Connection(Target::library(comm, n.rank, n.send_tag, n.recv_tag));
    }
    s.exchange_headers(options);
    s.make_windows();
    s.schedule();
    s.prime();
    for (const NeighborLink& link : s.links) {
        s.rails = std::max(s.rails, link.rails);
    }
}

NeighborCore::NeighborCore(NeighborCore&&) noexcept = default;
NeighborCore& NeighborCore::operator=(NeighborCore&&) noexcept = default;
NeighborCore::~NeighborCore() = default;

void NeighborCore::start() {
    if (!state_) {
        throw UsageError("pmr: start() on an empty (moved-from) neighbour exchange");
    }
    State& s = *state_;
    if (s.running) {
        throw UsageError("pmr: neighbour exchange on rank " + std::to_string(s.rank) +
                         ": start() while a round is running; call wait() or test() until it "
                         "returns true first");
    }
    for (NeighborLink& link : s.links) {
        for (auto& w : link.recvs) {
            w.init();
        }
        for (auto& w : link.sends) {
            w.init();
        }
    }
    for (NeighborPost& p : s.posts) {
        if (p.multi_rail) {
            p.window->post(&p.range, 1);
        } else {
            p.window->post();
        }
    }
    for (NeighborLink& link : s.links) {
        for (auto& w : link.recvs) {
            w.post();
        }
    }
    std::fill(s.finished.begin(), s.finished.end(), 0);
    s.unfinished = s.waitables.size();
    s.running = true;
}

void NeighborCore::wait() {
    if (!state_ || !state_->running) {
        throw UsageError("pmr: wait() on a neighbour exchange without a running round; call "
                         "start() first");
    }
    State& s = *state_;
    if (s.unfinished == s.waitables.size()) {
        wait_all(s.waitables.data(), s.waitables.size());
    } else {
        // A test() completed some windows already; waiting on the others one by one could hold
        // up a peer that waits for one of the later ones (see test()).
        while (!s.poll_unfinished()) {
            std::this_thread::yield();
        }
    }
    s.running = false;
}

bool NeighborCore::test() {
    if (!state_ || !state_->running) {
        throw UsageError("pmr: test() on a neighbour exchange without a running round; call "
                         "start() first");
    }
    if (!state_->poll_unfinished()) {
        return false;
    }
    state_->running = false;
    return true;
}

std::size_t NeighborCore::size() const noexcept {
    return state_ ? state_->neighbors.size() : 0;
}

const Neighbor& NeighborCore::neighbor(std::size_t neighbor) const {
    if (!state_ || neighbor >= state_->neighbors.size()) {
        throw ArgumentError("pmr: neighbour index " + std::to_string(neighbor) +
                            " is out of range: the exchange has " + std::to_string(size()) +
                            " neighbours");
    }
    return state_->neighbors[neighbor];
}

std::byte* NeighborCore::send_data(std::size_t neighbor) const {
    this->neighbor(neighbor);
    return state_->send[neighbor];
}

std::byte* NeighborCore::recv_data(std::size_t neighbor) const {
    this->neighbor(neighbor);
    return state_->recv[neighbor];
}

NeighborAlgorithm NeighborCore::algorithm() const noexcept {
    return state_ ? state_->algorithm : NeighborAlgorithm::automatic;
}

std::size_t NeighborCore::fragments(std::size_t neighbor) const {
    this->neighbor(neighbor);
    const std::size_t link = state_->link_of[neighbor];
    return link == static_cast<std::size_t>(-1) ? 0 : state_->links[link].send_fragments;
}

NeighborAlgorithm NeighborCore::algorithm(std::size_t neighbor) const {
    return fragments(neighbor) > 1 ? NeighborAlgorithm::split : NeighborAlgorithm::direct;
}

std::size_t NeighborCore::rails() const noexcept {
    return state_ ? state_->rails : 0;
}

std::size_t NeighborCore::steps() const noexcept {
    return state_ ? state_->steps : 0;
}

std::size_t NeighborCore::crossover_bytes() const noexcept {
    std::size_t crossover = 0;
    if (state_) {
        for (const NeighborLink& link : state_->links) {
            crossover = std::max(crossover, link.crossover);
        }
    }
    return crossover;
}

std::string NeighborCore::describe() const {
    if (!state_) {
        return "empty neighbour exchange";
    }
    const State& s = *state_;
    std::ostringstream out;
    out << "neighbour exchange on rank " << s.rank << ": " << s.neighbors.size() << " neighbours, "
        << s.rails << " rail(s), " << to_string(s.algorithm);
    if (s.steps > 0) {
        out << ", split in " << s.steps << " step(s)";
    }
    for (const NeighborLink& link : s.links) {
        const Neighbor& n = s.neighbors[link.index];
        out << "; [" << link.index << "] rank " << n.rank << ": " << n.send_count * s.element_size
            << " B in " << link.send_fragments << " fragment(s) over " << link.rails << " rail(s)";
    }
    return out.str();
}

std::vector<Neighbor> cartesian_neighbors(const Communicator& cart,
                                          const std::vector<std::size_t>& counts, int tag_offset) {
    const int dims = cart.dimensions();
    if (dims == 0) {
        throw UsageError("pmr: neighbour exchange on rank " + std::to_string(cart.rank()) +
                         ": the communicator has no Cartesian grid; make it with "
                         "pmr::Communicator(comm, dims, periodic) or give a neighbour list");
    }
    if (counts.size() != 2 * static_cast<std::size_t>(dims)) {
        throw ArgumentError("pmr: neighbour exchange on rank " + std::to_string(cart.rank()) +
                            ": " + std::to_string(counts.size()) + " counts for a grid of " +
                            std::to_string(dims) + " dimensions; give 2 per dimension");
    }
    std::vector<Neighbor> neighbors;
    for (int d = 0; d < dims; ++d) {
        for (int direction : {-1, 1}) {
            // The tags of Communicator::target(), so that extents 1 and 2 pair the same way.
            const int up = 2 * d + 1 + tag_offset;
            const int down = 2 * d + tag_offset;
            Neighbor n;
            n.rank = cart.neighbor(d, direction);
            // Every rank gives the same counts: the neighbour in `direction` sends what this
            // rank sends in the opposite direction.
            n.send_count = counts[neighbors.size()];
            n.recv_count = counts[2 * static_cast<std::size_t>(d) + (direction > 0 ? 0 : 1)];
            n.send_tag = direction > 0 ? up : down;
            n.recv_tag = direction > 0 ? down : up;
            neighbors.push_back(n);
        }
    }
    return neighbors;
}

} // namespace detail
} // namespace pmr
