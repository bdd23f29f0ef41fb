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
#include "collectives/engine.hpp"
#include "collectives/schedules.hpp"

#include "base/error.hpp"
#include "base/library_target.hpp"
#include "base/names.hpp"

#include <pmr/memory.hpp>
#include <pmr/neighbor.hpp>
#include <pmr/settings.hpp>
#include <pmr/target.hpp>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <numeric>
#include <sstream>

namespace pmr {

namespace {

/// The first name of each is the one printed; "auto" is read too.
constexpr detail::Named<NeighborAlgorithm> neighbor_algorithm_names[] = {
    {NeighborAlgorithm::direct, "direct"},
    {NeighborAlgorithm::split, "split"},
    {NeighborAlgorithm::automatic, "automatic"},
    {NeighborAlgorithm::automatic, "auto"}};

} // namespace

std::string_view to_string(NeighborAlgorithm algorithm) noexcept {
    return detail::name_of(algorithm, neighbor_algorithm_names, "unknown");
}

std::optional<NeighborAlgorithm> neighbor_algorithm_from_string(std::string_view name) noexcept {
    return detail::value_of(name, neighbor_algorithm_names);
}

namespace detail {

namespace {

constexpr std::uint64_t header_magic = 0x706d722d6e626802; // "pmr-nbh" and a version
constexpr std::size_t header_words = 9;
/// Calibration: batches per algorithm and rounds per batch (after one warm-up round each).
constexpr int calibration_batches = 3;
constexpr int calibration_rounds = 2;
constexpr std::size_t buffer_alignment = 64;

/// Defaults when neither the options, the environment nor the calibration (automatic's default)
/// name a size: what the provider says of itself (pmr::traits(); the reasons for each value are
/// with the provider).
struct SizeDefaults {
    std::size_t crossover;
    std::size_t min_fragment;
};

SizeDefaults size_defaults(Provider provider) {
    const ProviderTraits t = traits(provider);
    return {t.split_crossover_bytes, t.min_fragment_bytes};
}

std::string where(int rank, std::size_t index, int peer) {
    return "neighbour exchange on rank " + std::to_string(rank) + ", neighbour " +
           std::to_string(index) + " (rank " + std::to_string(peer) + ")";
}

/// The precedence rule of pmr/settings.hpp: the options where they choose, else
/// PMR_NEIGHBOR_ALGORITHM, else automatic.
NeighborAlgorithm chosen_algorithm(NeighborAlgorithm in_code) {
    if (in_code != NeighborAlgorithm::automatic) {
        return in_code;
    }
    return neighbor_algorithm_from_string(*settings::choice("PMR_NEIGHBOR_ALGORITHM"))
        .value_or(NeighborAlgorithm::automatic);
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
    std::size_t rails = 1;           // agreed by both ends
    std::size_t crossover = 0;       // agreed (or set by the calibration)
    std::size_t min_fragment = 0;    // agreed
    std::size_t send_bytes = 0;      // of the message to the peer
    std::size_t recv_bytes = 0;      // of the message from the peer
    std::size_t split_fragments = 0; // the message's fragments when split: 0 if empty
    std::size_t send_fragments = 0;  // in use: 0 if empty, 1 when sent whole
    SendWindow<unsigned char> send;  // empty if nothing is sent
    RecvWindow<unsigned char> recv;  // empty if nothing is received
};

/// Starts a round of `link`'s header windows, the send carrying its first `words` words (all of
/// them if none are given), and adds both windows to `list` for the caller's wait.
void start_header_round(NeighborLink& link, std::vector<Waitable>& list, std::size_t words = 0) {
    link.header_recv.init();
    link.header_send.init();
    if (words == 0) {
        link.header_send.post();
    } else {
        link.header_send.post(Elements{words});
    }
    link.header_recv.post();
    list.push_back(waitable(link.header_send));
    list.push_back(waitable(link.header_recv));
}

/// A window of `bytes` on `connection`: library-owned when `owned` (then `buffer` is set to its
/// memory), else over the caller's `buffer`.
template <class Window>
Window make_window(Connection& connection, bool owned, std::byte*& buffer, std::size_t bytes) {
    if (owned) {
        Window window(connection, bytes);
        buffer = reinterpret_cast<std::byte*>(window.data());
        return window;
    }
    return Window(connection, reinterpret_cast<unsigned char*>(buffer), bytes);
}

/// One post of a round: a window and its pieces per rail (none: a plain post on rail 0), in bytes:
/// posted through the window's core, the byte form that needs no conversion per post.
struct NeighborPost {
    SendWindow<unsigned char>* window;
    std::vector<RailRange> ranges;
};

struct NeighborCore::State {
    int rank = 0;
    int comm_size = 1;
    std::vector<Neighbor> neighbors;
    std::size_t element_size = 1;
    NeighborAlgorithm algorithm = NeighborAlgorithm::automatic;
    bool calibrate = false; // automatic without a given crossover: time both at set-up
    std::vector<std::byte*> send;
    std::vector<std::byte*> recv;
    bool owned = false; // library-owned buffers
    std::byte* owned_send = nullptr;
    std::byte* owned_recv = nullptr;
    std::vector<NeighborLink> links;
    std::vector<std::size_t> link_of; // neighbour index -> link, or npos
    std::vector<NeighborPost> posts;
    std::vector<Waitable> waitables;
    // The windows with bytes, flat, for the loops of a round (the module's own cost per round
    // is those loops: they call the windows' cores directly, as hand-written code calls them).
    std::vector<WindowCore<Side::recv>*> receivers;
    std::vector<WindowCore<Side::send>*> senders;
    // Per waitable, the round in which it last completed: a round starts without resetting them.
    std::vector<std::uint64_t> finished;
    std::uint64_t round_number = 0;
    std::size_t unfinished = 0;
    std::vector<Waitable> pending; // wait(): the windows its first pass left unfinished
    std::size_t rails = 1;
    std::size_t steps = 0;
    bool running = false;

    ~State() {
        // Windows first: they refer to the owned memory.
        links.clear();
        deallocate_bytes(owned_send);
        deallocate_bytes(owned_recv);
    }

    /// Fragments of the message on `link` when split: 0 if empty, else one per rail as long as
    /// each keeps the minimum fragment size and an element.
    std::size_t split_fragments_of(const NeighborLink& link) const {
        const std::size_t bytes = link.send_bytes;
        if (bytes == 0) {
            return 0;
        }
        if (link.rails <= 1) {
            return 1;
        }
        const std::size_t elements = bytes / element_size;
        const std::size_t by_size =
            std::max<std::size_t>(1, bytes / std::max<std::size_t>(1, link.min_fragment));
        return std::max<std::size_t>(1, std::min({link.rails, by_size, elements}));
    }

    /// Whether `mode` splits the message on `link` (automatic: by the link's crossover).
    bool splits(const NeighborLink& link, NeighborAlgorithm mode) const {
        if (link.split_fragments <= 1 || mode == NeighborAlgorithm::direct) {
            return false;
        }
        return mode == NeighborAlgorithm::split || link.send_bytes >= link.crossover;
    }

    std::string here(const NeighborLink& link) const {
        return where(rank, link.index, neighbors[link.index].rank);
    }

    void allocate_owned();
    void exchange_headers(const NeighborOptions& options);
    void make_windows();
    std::vector<NeighborPost> plan(NeighborAlgorithm mode);
    void use(NeighborAlgorithm mode);
    void prime();
    void round();
    void calibrate_algorithm();
    std::vector<std::uint64_t> flood_max(std::vector<std::uint64_t> values);

    // Every unfinished window is tested on every call, and each completes on its own: test_all()
    // stops polling at the first unfinished window, and over a provider whose polling is what
    // moves a connection's traffic (UCX over TCP), two ranks would each poll only the window that
    // waits for the other's unpolled one.
    // Every completion is counted at once, so that a test() that throws (Timeout, PeerLost)
    // leaves the round's count right: later calls poll only the windows still open.
    bool poll_unfinished() {
        const Waitable* const windows = waitables.data();
        std::uint64_t* const done = finished.data();
        const std::size_t count = waitables.size();
        const std::uint64_t current = round_number;
        for (std::size_t i = 0; i < count; ++i) {
            if (done[i] != current) {
                const Waitable& w = windows[i];
                if (w.send != nullptr ? w.send->test() : w.recv->test()) {
                    done[i] = current;
                    --unfinished;
                }
            }
        }
        return unfinished == 0;
    }

    /// After a wait() that threw (Timeout, PeerLost): counts the windows that completed before
    /// the throw, in its first pass or inside wait_all(), so that wait() or test() can be called
    /// again for the rest of the round (a completed window must not be waited on twice).
    void count_completed() noexcept {
        for (std::size_t i = 0; i < waitables.size(); ++i) {
            const Waitable& w = waitables[i];
            if (finished[i] != round_number &&
                !(w.send != nullptr ? w.send->posted() : w.recv->posted())) {
                finished[i] = round_number;
                --unfinished;
            }
        }
    }

    /// Starts the bookkeeping of a round: every window unfinished.
    void begin_round() noexcept {
        ++round_number;
        unfinished = waitables.size();
    }
};

// One round of empty posts completes the set-up of every data window now (the first init() of a
// window waits for its peer's): start() then never waits for set-up, and no window is left
// unused if the exchange is destroyed before its first round. Empty posts move no bytes, so the
// receive buffers are not touched.
void NeighborCore::State::prime() {
    for (NeighborLink& link : links) {
        if (link.recv.bytes() > 0) {
            link.recv.init();
        }
        if (link.send.bytes() > 0) {
            link.send.init();
            link.send.post(Elements{0});
        }
        if (link.recv.bytes() > 0) {
            link.recv.post();
        }
    }
    wait_all(waitables.data(), waitables.size());
    finished.assign(waitables.size(), round_number);
    pending.reserve(waitables.size());
}

// Library-owned buffers: every message lives in its window's own memory (the fastest path of
// every provider, and no cost over hand-written owned windows); null neighbours and empty
// messages get (empty) slices of one pmr allocation per side.
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
           [&](std::size_t i) { return link_at(i) != nullptr && link_at(i)->send_bytes > 0; },
           owned_send, send);
    layout([](const Neighbor& n) { return n.recv_count; },
           [&](std::size_t i) { return link_at(i) != nullptr && link_at(i)->recv_bytes > 0; },
           owned_recv, recv);
}

void NeighborCore::State::exchange_headers(const NeighborOptions& options) {
    const std::optional<std::size_t> crossover_env = settings::size("PMR_NEIGHBOR_CROSSOVER");
    const std::optional<std::size_t> fragment_env = settings::size("PMR_NEIGHBOR_MIN_FRAGMENT");
    calibrate = algorithm == NeighborAlgorithm::automatic && options.crossover_bytes == 0 &&
                !crossover_env && options.calibrate && *settings::flag("PMR_NEIGHBOR_CALIBRATE");
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
        link.send_bytes = n.send_count * element_size;
        link.recv_bytes = n.recv_count * element_size;
        const std::uint64_t mine[header_words] = {header_magic,
                                                  element_size,
                                                  link.send_bytes,
                                                  link.recv_bytes,
                                                  static_cast<std::uint64_t>(algorithm),
                                                  link.crossover,
                                                  link.min_fragment,
                                                  link.rails,
                                                  calibrate ? 1U : 0U};
        std::copy(std::begin(mine), std::end(mine), link.header_send.data());
        start_header_round(link, list);
    }
    wait_all(list.data(), list.size());

    for (NeighborLink& link : links) {
        const std::uint64_t* peer = link.header_recv.data();
        const std::string at = here(link);
        if (link.header_recv.received_bytes() != header_words * sizeof(std::uint64_t) ||
            peer[0] != header_magic) {
            raise<ArgumentError>(
                "the peer's connection is not a neighbour exchange of this pmr version", at,
                "Create the same exchanges in the same order on both ranks.");
        }
        if (peer[1] != element_size) {
            raise<ArgumentError>("elements of " + std::to_string(element_size) + " bytes here, " +
                                     std::to_string(peer[1]) + " bytes on the peer",
                                 at, "Both must use the same element type.");
        }
        const auto bytes_text = [&](std::uint64_t bytes) {
            return std::to_string(bytes / element_size) + " elements";
        };
        if (peer[2] != link.recv_bytes) {
            raise<SizeError>("expects " + bytes_text(link.recv_bytes) +
                                 " from the peer, which sends " + bytes_text(peer[2]),
                             at, "The recv count here must equal the send count there.");
        }
        if (peer[3] != link.send_bytes) {
            raise<SizeError>("sends " + bytes_text(link.send_bytes) +
                                 " to the peer, which expects " + bytes_text(peer[3]),
                             at, "The send count here must equal the recv count there.");
        }
        if (peer[4] != static_cast<std::uint64_t>(algorithm)) {
            raise<ArgumentError>(
                "algorithm " + std::string(to_string(algorithm)) + " here, " +
                    std::string(to_string(static_cast<NeighborAlgorithm>(peer[4]))) +
                    " on the peer",
                at, "Give every rank the same options and PMR_NEIGHBOR_ALGORITHM.");
        }
        if (peer[8] != (calibrate ? 1U : 0U)) {
            raise<ArgumentError>(
                std::string("automatic ") +
                    (calibrate ? "calibrates here and takes a given crossover on the peer"
                               : "takes a given crossover here and calibrates on the peer"),
                at,
                "Give every rank the same crossover_bytes and calibrate options and the same "
                "PMR_NEIGHBOR_CROSSOVER and PMR_NEIGHBOR_CALIBRATE.");
        }
        link.crossover = std::max<std::size_t>(link.crossover, peer[5]);
        link.min_fragment = std::max<std::size_t>(link.min_fragment, peer[6]);
        link.rails = std::max<std::size_t>(1, std::min<std::size_t>(link.rails, peer[7]));
    }
}

// One window per message and side, whatever the algorithm: the receiver sees one transfer, and
// the sender alone decides, post by post, which rails carry which bytes (RailRange). Split and
// direct therefore differ only in the pieces of the posts, the calibration can time both over
// the same windows, and a split message costs one notice round trip instead of one per fragment.
void NeighborCore::State::make_windows() {
    for (NeighborLink& link : links) {
        link.split_fragments = split_fragments_of(link);
    }
    if (owned) {
        allocate_owned();
    }
    for (NeighborLink& link : links) {
        if (link.send_bytes > 0) {
            link.send = make_window<SendWindow<unsigned char>>(link.connection, owned,
                                                               send[link.index], link.send_bytes);
        }
        if (link.recv_bytes > 0) {
            link.recv = make_window<RecvWindow<unsigned char>>(link.connection, owned,
                                                               recv[link.index], link.recv_bytes);
        }
    }
    waitables.clear();
    receivers.clear();
    senders.clear();
    for (NeighborLink& link : links) {
        if (link.send.bytes() > 0) {
            waitables.push_back(waitable(link.send));
            senders.push_back(&link.send.core());
        }
        if (link.recv.bytes() > 0) {
            waitables.push_back(waitable(link.recv));
            receivers.push_back(&link.recv.core());
        }
    }
}

// The schedule of Morie & Nanri. With m split messages and n rails, every message is cut into n
// fragments and every rail carries one fragment of every message: 1/n of each, m/n messages'
// worth per rail, the least any schedule can give the busiest rail. The order decides what the
// rails do at the same time: if m/n reduces by d = gcd(m, n), the messages form m/d groups of d,
// and in step s rail k carries its fragments of group (s + k) mod (m/d). Every step then moves d/n
// messages' worth per rail on every rail, and the rails of a step serve different neighbours
// (different links) instead of all queueing on the same one.
//
// Example: 6 neighbours (a 3D grid), 4 rails. 6/4 reduces by d = 2 to 3/2: three groups {0,1},
// {2,3}, {4,5} and 6/2 = 3 steps. Step 0: rail 0 sends its quarters of messages 0 and 1, rail 1
// of 2 and 3, rail 2 of 4 and 5, rail 3 of 0 and 1; step 1 shifts every rail to the next group,
// step 2 once more. After 3 steps every rail has sent a quarter of all 6 messages (1.5 messages
// each, against 2 on the busiest rail when messages go whole on rail i mod 4).
//
// In pmr a message is one window whose post lists its fragments with their rails (see
// make_windows()): fragment f of the j-th split message goes on rail (f + j) mod n, the seed's
// "fragment k on NIC k" rotated per message, which gives every rail one fragment of every message
// as the schedule does, and keeps the rails balanced also when a message has fewer than n
// fragments (too small to give every rail the minimum fragment). What the schedule fixes beyond
// that, the order in time, pmr leaves to the rails: every rail runs its pieces in the order of the
// posts. On Tofu the TNIs are independent queues, so the busiest rail's load decides the round's
// time (1.5 against 2 messages in the example), not which neighbour a rail serves first. Messages
// sent whole go first, on lane (q mod n) for the q-th of them (the same device on every
// connection, see rail_of_lane()). split_schedule() is the seed's plan
// (steps() reports its length); the tests check that it gives every rail 1/n of every message.
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

std::vector<NeighborPost> NeighborCore::State::plan(NeighborAlgorithm mode) {
    std::vector<NeighborPost> result;
    std::vector<NeighborLink*> split;
    std::size_t whole = 0;
    for (NeighborLink& link : links) {
        if (link.send_bytes == 0) {
            continue;
        }
        if (splits(link, mode)) {
            split.push_back(&link);
        } else if (link.rails > 1) {
            // Lane q mod n is the same device on every connection (rails are numbered per
            // connection from a device that rotates, on tofu): whole messages spread over the
            // devices as over the rails.
            const std::size_t rail =
                coll::rail_of_lane(link.connection, static_cast<int>(whole++ % link.rails));
            result.push_back({&link.send, {RailRange{0, link.send_bytes, rail}}});
        } else {
            result.push_back({&link.send, {}});
        }
    }
    std::size_t n = 1;
    for (const NeighborLink* link : split) {
        n = std::max(n, link->rails);
    }
    steps = split_schedule(split.size(), n).size();
    for (std::size_t j = 0; j < split.size(); ++j) {
        NeighborLink& link = *split[j];
        const std::size_t count = link.send_bytes / element_size;
        NeighborPost post{&link.send, {}};
        for (std::size_t f = 0; f < link.split_fragments; ++f) {
            const std::size_t first = fragment_begin(count, link.split_fragments, f);
            const std::size_t last = fragment_begin(count, link.split_fragments, f + 1);
            post.ranges.push_back(RailRange{first * element_size, (last - first) * element_size,
                                            (f + j) % n % link.rails});
        }
        result.push_back(std::move(post));
    }
    return result;
}

void NeighborCore::State::use(NeighborAlgorithm mode) {
    posts = plan(mode);
    for (NeighborLink& link : links) {
        link.send_fragments =
            link.send_bytes == 0 ? 0 : (splits(link, mode) ? link.split_fragments : 1);
    }
}

/// One whole round (start and wait) with the current posts.
void NeighborCore::State::round() {
    for (WindowCore<Side::recv>* window : receivers) {
        window->init();
    }
    for (WindowCore<Side::send>* window : senders) {
        window->init();
    }
    for (NeighborPost& p : posts) {
        if (p.ranges.empty()) {
            p.window->post();
        } else {
            p.window->core().post(p.ranges.data(), p.ranges.size());
        }
    }
    for (WindowCore<Side::recv>* window : receivers) {
        window->post(window->bytes());
    }
}

// The element-wise maximum of `values` over every rank connected to this one through neighbour
// links: each round sends the current maxima to every neighbour over the header windows and keeps
// the larger values received. After comm size - 1 rounds (at least the diameter of any connected
// neighbour graph) every rank of a connected part holds the same maxima, which the calibration
// needs: whether it runs at all must be the same on both ends of every link, or one would wait
// for rounds the other never starts. Every rank runs the same number of rounds (a function of the
// communicator's size), so the header windows stay paired.
std::vector<std::uint64_t> NeighborCore::State::flood_max(std::vector<std::uint64_t> values) {
    const auto rounds = static_cast<std::size_t>(comm_size - 1);
    std::vector<Waitable> list;
    for (std::size_t r = 0; r < rounds && !links.empty(); ++r) {
        list.clear();
        for (NeighborLink& link : links) {
            std::uint64_t* out = link.header_send.data();
            out[0] = header_magic + 1 + r;
            std::copy(values.begin(), values.end(), out + 1);
            start_header_round(link, list, values.size() + 1);
        }
        wait_all(list.data(), list.size());
        for (NeighborLink& link : links) {
            const std::uint64_t* in = link.header_recv.data();
            if (link.header_recv.received_bytes() != (values.size() + 1) * sizeof(std::uint64_t) ||
                in[0] != header_magic + 1 + r) {
                raise<ArgumentError>("the peer's calibration message is out of step", here(link),
                                     "Create the same exchanges in the same order on every "
                                     "rank.");
            }
            for (std::size_t i = 0; i < values.size(); ++i) {
                values[i] = std::max(values[i], in[i + 1]);
            }
        }
    }
    return values;
}

// automatic without a given crossover: a short timed trial of both algorithms over the exchange
// itself (the same windows; only the pieces of the posts differ). Rounds alternate between the
// two in batches, each batch timed on every rank; a rank's time for an algorithm is its fastest
// batch, and the exchange's time is the slowest rank's (a round ends for everybody only when its
// slowest rank is done), agreed by flooding the maxima over the neighbour links. Every rank then
// makes the same choice. The trial's rounds move whatever the buffers hold.
void NeighborCore::State::calibrate_algorithm() {
    std::uint64_t splittable = 0;
    for (const NeighborLink& link : links) {
        splittable |= link.split_fragments > 1 ? 1U : 0U;
    }
    if (flood_max({splittable})[0] == 0) {
        use(NeighborAlgorithm::direct); // nothing to split anywhere
        return;
    }
    const auto timed = [&](NeighborAlgorithm mode, int rounds) {
        use(mode);
        const auto begin = std::chrono::steady_clock::now();
        for (int r = 0; r < rounds; ++r) {
            round();
            wait_all(waitables.data(), waitables.size());
        }
        return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                              std::chrono::steady_clock::now() - begin)
                                              .count());
    };
    (void)timed(NeighborAlgorithm::direct, 1); // warm-up: first touches of every path
    (void)timed(NeighborAlgorithm::split, 1);
    std::uint64_t best[2] = {~std::uint64_t{0}, ~std::uint64_t{0}};
    for (int batch = 0; batch < calibration_batches; ++batch) {
        best[0] = std::min(best[0], timed(NeighborAlgorithm::direct, calibration_rounds));
        best[1] = std::min(best[1], timed(NeighborAlgorithm::split, calibration_rounds));
    }
    const std::vector<std::uint64_t> slowest = flood_max({best[0], best[1]});
    const bool split_wins = slowest[1] < slowest[0];
    // Record the choice as the crossover of automatic: the splittable messages from the smallest
    // on, or none.
    for (NeighborLink& link : links) {
        link.crossover = split_wins ? 0 : std::numeric_limits<std::size_t>::max();
    }
    use(NeighborAlgorithm::automatic);
}
NeighborCore::NeighborCore(const Communicator& comm, const std::vector<Neighbor>& neighbors,
                           std::size_t element_size, const std::vector<void*>& send,
                           const std::vector<void*>& recv, const NeighborOptions& options)
    : state_(std::make_unique<State>()) {
    State& s = *state_;
    s.rank = comm.rank();
    s.comm_size = comm.size();
    s.neighbors = neighbors;
    s.element_size = element_size;
    s.algorithm = chosen_algorithm(options.algorithm);
    const std::string self = "neighbour exchange on rank " + std::to_string(s.rank);
    if (send.empty() && recv.empty()) {
        s.owned = true; // allocated once the fragments are known (make_windows)
        s.send.assign(neighbors.size(), nullptr);
        s.recv.assign(neighbors.size(), nullptr);
    } else {
        if (send.size() != neighbors.size() || recv.size() != neighbors.size()) {
            raise<ArgumentError>(std::to_string(neighbors.size()) + " neighbours but " +
                                     std::to_string(send.size()) + " send and " +
                                     std::to_string(recv.size()) + " receive buffers",
                                 self, "Give one buffer per neighbour and side.");
        }
        for (std::size_t i = 0; i < neighbors.size(); ++i) {
            if ((send[i] == nullptr && neighbors[i].send_count > 0) ||
                (recv[i] == nullptr && neighbors[i].recv_count > 0)) {
                raise<ArgumentError>("null buffer for neighbour " + std::to_string(i) +
                                         " with a count above 0",
                                     self);
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
        link.connection = Connection(library_target(comm, n.rank, n.send_tag, n.recv_tag));
    }
    s.exchange_headers(options);
    s.make_windows();
    s.prime();
    if (s.calibrate) {
        s.calibrate_algorithm();
    } else {
        s.use(s.algorithm);
    }
    for (const NeighborLink& link : s.links) {
        s.rails = std::max(s.rails, link.rails);
    }
}

NeighborCore::NeighborCore(NeighborCore&&) noexcept = default;
NeighborCore& NeighborCore::operator=(NeighborCore&&) noexcept = default;
NeighborCore::~NeighborCore() = default;

void NeighborCore::start() {
    if (!state_) {
        raise<UsageError>("start() on an empty (moved-from) neighbour exchange",
                          "neighbour exchange");
    }
    State& s = *state_;
    if (s.running) {
        raise<UsageError>("start() while a round is running",
                          "neighbour exchange on rank " + std::to_string(s.rank),
                          "Call wait() or test() until it returns true first.");
    }
    s.round();
    s.begin_round();
    s.running = true;
}

void NeighborCore::wait() {
    if (!state_ || !state_->running) {
        raise<UsageError>("wait() without a running round", "neighbour exchange",
                          "Call start() first.");
    }
    State& s = *state_;
    // Every window is polled once, as hand-written code would wait on each (a window whose round
    // is complete costs its poll and no more), and the unfinished ones are waited for together,
    // so that waiting on one never holds up a peer that needs another polled (see test()).
    // The first pass records nothing per window; if anything throws, the windows' own states
    // tell which completed (count_completed).
    s.pending.clear();
    try {
        if (s.unfinished == s.waitables.size()) {
            for (WindowCore<Side::send>* window : s.senders) {
                if (!window->test()) {
                    s.pending.push_back(Waitable{window, nullptr});
                }
            }
            for (WindowCore<Side::recv>* window : s.receivers) {
                if (!window->test()) {
                    s.pending.push_back(Waitable{nullptr, window});
                }
            }
        } else if (!s.poll_unfinished()) { // a test() or a wait() that threw completed some
            for (std::size_t i = 0; i < s.waitables.size(); ++i) {
                if (s.finished[i] != s.round_number) {
                    s.pending.push_back(s.waitables[i]);
                }
            }
        }
        if (!s.pending.empty()) {
            wait_all(s.pending.data(), s.pending.size());
        }
    } catch (...) {
        s.count_completed();
        throw;
    }
    s.unfinished = 0;
    s.running = false;
}

bool NeighborCore::test() {
    if (!state_ || !state_->running) {
        raise<UsageError>("test() without a running round", "neighbour exchange",
                          "Call start() first.");
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
        raise<ArgumentError>("neighbour index " + std::to_string(neighbor) +
                                 " is out of range: the exchange has " + std::to_string(size()) +
                                 " neighbours",
                             "neighbour exchange");
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
        out << "; [" << link.index << "] rank " << n.rank << ": " << link.send_bytes << " B in "
            << link.send_fragments << " fragment(s) over " << link.rails << " rail(s)";
    }
    return out.str();
}

std::vector<Neighbor> cartesian_neighbors(const Communicator& cart,
                                          const std::vector<std::size_t>& counts, int tag_offset) {
    const int dims = cart.dimensions();
    if (dims == 0) {
        raise<UsageError>("the communicator has no Cartesian grid",
                          "neighbour exchange on rank " + std::to_string(cart.rank()),
                          "Make it with pmr::Communicator(comm, dims, periodic) or give a "
                          "neighbour list.");
    }
    if (counts.size() != 2 * static_cast<std::size_t>(dims)) {
        raise<ArgumentError>(std::to_string(counts.size()) + " counts for a grid of " +
                                 std::to_string(dims) + " dimensions",
                             "neighbour exchange on rank " + std::to_string(cart.rank()),
                             "Give 2 per dimension.");
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
