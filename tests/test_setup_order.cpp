// SPDX-License-Identifier: MIT
// Connections and windows created in different orders on different ranks must still pair as the
// documentation says: by tags, then by creation order among identical targets, and per connection
// the k-th send window with the peer's k-th receive window. Construction never blocks, so orders
// that would deadlock a blocking set-up must work too.
#include "support.hpp"

#include <pmr/pmr.hpp>

#include <catch2/catch.hpp>
#include <mpi.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

using namespace pmr_test;

namespace {

using Element = std::uint32_t;

/// Send tag of the connection from `from` to `to` (the receive tag is tag(to, from)), so that the
/// connections of two ranks to each other pair, and a self connection has equal tags.
int tag(int base, int from, int to) {
    return base + from * world_size() + to;
}

/// Elements `from` sends to `to` in its `window`-th send window on their connection `copy`.
std::size_t count_of(int from, int to, std::size_t window, std::size_t copy = 0) {
    return 1 + (static_cast<std::size_t>(from) * 7 + static_cast<std::size_t>(to) * 3 + window * 5 +
                copy * 11) %
                   23;
}

std::uint64_t message_seed(int test, int from, int to, std::size_t window, std::size_t copy,
                           int iteration) {
    return seed_of({static_cast<std::uint64_t>(test), static_cast<std::uint64_t>(from),
                    static_cast<std::uint64_t>(to), window, copy,
                    static_cast<std::uint64_t>(iteration)});
}

std::uint64_t sentinel_seed(int test, std::size_t index, int iteration) {
    return seed_of({0xdeadULL, static_cast<std::uint64_t>(test), index,
                    static_cast<std::uint64_t>(iteration)});
}

/// Identifies the message of a window: peer, index among the windows of its side on its connection,
/// and which of several connections with identical targets it is on.
struct Slot {
    int peer;
    std::size_t window;
    std::size_t copy;
};

/// Windows with the slot of each, in creation order.
struct Windows {
    std::vector<BufferedSend<Element>> sends;
    std::vector<Slot> send_slots;
    std::vector<BufferedRecv<Element>> recvs;
    std::vector<Slot> recv_slots;

    void add_send(const pmr::Connection& connection, Slot slot, int me, Memory memory) {
        sends.emplace_back(connection, memory, count_of(me, slot.peer, slot.window, slot.copy));
        send_slots.push_back(slot);
    }
    /// Receive windows have room for the largest message any copy may carry, plus some slack, so
    /// that a mix-up shows in the data rather than as a SizeError.
    void add_recv(const pmr::Connection& connection, Slot slot, Memory memory) {
        recvs.emplace_back(connection, memory, 24 + slot.window % 3);
        recv_slots.push_back(slot);
    }
};

/// Runs `iterations` rounds on all windows and checks every received byte against what the peer's
/// matching window must have sent.
void run_and_verify(int test, Windows& windows, int iterations) {
    const int me = world_rank();
    for (int iteration = 0; iteration < iterations; ++iteration) {
        const Completion completion = iteration % 2 == 0 ? Completion::wait : Completion::test;
        INFO("iteration " << iteration << " with " << to_string(completion));
        for (std::size_t i = 0; i < windows.sends.size(); ++i) {
            const Slot& slot = windows.send_slots[i];
            fill_pattern(windows.sends[i]->data(), windows.sends[i]->bytes(),
                         message_seed(test, me, slot.peer, slot.window, slot.copy, iteration));
        }
        for (std::size_t i = 0; i < windows.recvs.size(); ++i) {
            fill_pattern(windows.recvs[i]->data(), windows.recvs[i]->bytes(),
                         sentinel_seed(test, i, iteration));
        }
        exchange(windows.sends, windows.recvs, completion);
        for (std::size_t i = 0; i < windows.recvs.size(); ++i) {
            const auto& recv = *windows.recvs[i];
            const Slot& slot = windows.recv_slots[i];
            const std::string what = "rank " + std::to_string(me) + " from peer " +
                                     std::to_string(slot.peer) + ", window " +
                                     std::to_string(slot.window) + ", connection copy " +
                                     std::to_string(slot.copy) + ": " + recv.describe();
            INFO(what);
            const std::size_t bytes =
                count_of(slot.peer, me, slot.window, slot.copy) * sizeof(Element);
            const bool size_ok = recv.received_bytes() == bytes;
            CHECK(recv.received_bytes() == bytes);
            if (!size_ok) {
                continue;
            }
            check_pattern(recv.data(), 0, bytes,
                          message_seed(test, slot.peer, me, slot.window, slot.copy, iteration),
                          what);
            check_pattern(recv.data(), bytes, recv.bytes(), sentinel_seed(test, i, iteration),
                          what + ": bytes behind the message");
        }
    }
}

} // namespace

TEST_CASE("every rank creates connections and windows to all ranks in its own order",
          "[setup-order]") {
    start_together();
    const int me = world_rank();
    const int size = world_size();
    constexpr std::size_t windows_per_side = 3;
    // Six passes, each with its own orders, alternately without and with a barrier.
    for (int pass = 0; pass < 6; ++pass) {
        const bool barrier = pass % 2 == 1;
        const int test = 100 + pass;
        const int tag_base = 100 + 200 * pass;
        INFO("pass " << pass << ", " << (barrier ? "with" : "without")
                     << " a barrier between creation and first use");

        // One token per object: a connection per peer, then per peer its send and receive windows.
        // Shuffled per rank; a window token before its connection's token creates the connection.
        enum class Kind { connection, send, recv };
        struct Token {
            Kind kind;
            int peer;
        };
        std::vector<Token> tokens;
        for (int peer = 0; peer < size; ++peer) {
            tokens.push_back({Kind::connection, peer});
            for (std::size_t k = 0; k < windows_per_side; ++k) {
                tokens.push_back({Kind::send, peer});
                tokens.push_back({Kind::recv, peer});
            }
        }
        std::mt19937 random(static_cast<std::mt19937::result_type>(7919 * me + test));
        std::shuffle(tokens.begin(), tokens.end(), random);

        std::vector<std::unique_ptr<pmr::Connection>> connections(size);
        std::vector<std::size_t> sends_made(size, 0);
        std::vector<std::size_t> recvs_made(size, 0);
        Windows windows;
        windows.sends.reserve(tokens.size());
        windows.recvs.reserve(tokens.size());
        std::size_t made = 0;
        for (const Token& token : tokens) {
            auto& connection = connections[token.peer];
            if (!connection) {
                connection = std::make_unique<pmr::Connection>(
                    pmr::Target(MPI_COMM_WORLD, token.peer, tag(tag_base, me, token.peer),
                                tag(tag_base, token.peer, me)));
            }
            const Memory memory = all_memory[made++ % all_memory.size()];
            if (token.kind == Kind::send) {
                windows.add_send(*connection, {token.peer, sends_made[token.peer]++, 0}, me,
                                 memory);
            } else if (token.kind == Kind::recv) {
                windows.add_recv(*connection, {token.peer, recvs_made[token.peer]++, 0}, memory);
            }
        }
        if (barrier) {
            MPI_Barrier(MPI_COMM_WORLD);
        }
        // Guarded, so that a failure here still lets this rank join the next pass's barrier.
        bool ok = true;
        guarded(ok, [&] {
            run_and_verify(test, windows, 3);
            for (auto& connection : connections) {
                check_provider(*connection);
            }
        });
    }
}

TEST_CASE("cyclic creation order that would deadlock a blocking set-up", "[setup-order]") {
    start_together();
    // Rank r creates its connection to r + 1 and at once windows on it, then to r + 2, ... and to
    // itself last. Had construction waited for the peer, every rank would wait for its successor.
    constexpr int test = 3;
    const int me = world_rank();
    const int size = world_size();
    std::vector<std::unique_ptr<pmr::Connection>> connections;
    Windows windows;
    windows.sends.reserve(2 * static_cast<std::size_t>(size));
    windows.recvs.reserve(2 * static_cast<std::size_t>(size));
    for (int offset = 1; offset <= size; ++offset) {
        const int peer = (me + offset) % size;
        connections.push_back(std::make_unique<pmr::Connection>(
            pmr::Target(MPI_COMM_WORLD, peer, tag(2000, me, peer), tag(2000, peer, me))));
        const Memory memory = all_memory[static_cast<std::size_t>(offset) % all_memory.size()];
        windows.add_send(*connections.back(), {peer, 0, 0}, me, memory);
        windows.add_recv(*connections.back(), {peer, 0, 0}, memory);
        windows.add_send(*connections.back(), {peer, 1, 0}, me, Memory::owned);
        windows.add_recv(*connections.back(), {peer, 1, 0}, Memory::owned);
    }
    run_and_verify(test, windows, 2);
}

TEST_CASE("connections with identical targets pair in creation order", "[setup-order]") {
    start_together();
    // Three connections with the same target to every rank, also to itself (equal tags: each pairs
    // with itself). Windows are created on the last connection first, and the peers are visited in
    // a rank-dependent order, so only the creation order of the connections can pair them.
    constexpr int test = 4;
    constexpr std::size_t copies = 3;
    const int me = world_rank();
    const int size = world_size();
    std::vector<std::unique_ptr<pmr::Connection>> connections;
    std::vector<Slot> slots;
    for (int i = 0; i < size; ++i) {
        const int peer = (me + i) % size;
        for (std::size_t copy = 0; copy < copies; ++copy) {
            connections.push_back(std::make_unique<pmr::Connection>(
                pmr::Target(MPI_COMM_WORLD, peer, tag(3000, me, peer), tag(3000, peer, me))));
            slots.push_back({peer, 0, copy});
        }
    }
    Windows windows;
    windows.sends.reserve(connections.size());
    windows.recvs.reserve(connections.size());
    for (std::size_t i = connections.size(); i-- > 0;) {
        windows.add_recv(*connections[i], slots[i], all_memory[i % all_memory.size()]);
        windows.add_send(*connections[i], slots[i], me, all_memory[(i + 1) % all_memory.size()]);
    }
    run_and_verify(test, windows, 3);
}

TEST_CASE("self connections pair by swapped tags, or with themselves when the tags are equal",
          "[setup-order]") {
    start_together();
    constexpr int test = 5;
    const int me = world_rank();
    auto self = [&](int send_tag, int recv_tag) {
        return std::make_unique<pmr::Connection>(
            pmr::Target(MPI_COMM_WORLD, me, send_tag, recv_tag));
    };
    // a1 and b1 pair, then a2 and b2 (identical targets pair in creation order); c pairs with
    // itself, and so does each of d1, d2.
    auto a1 = self(40, 41);
    auto b1 = self(41, 40);
    auto b2 = self(41, 40);
    auto a2 = self(40, 41);
    auto c = self(42, 42);
    auto d1 = self(43, 43);
    auto d2 = self(43, 43);
    for (auto* connection : {&a1, &b1, &b2, &a2, &c, &d1, &d2}) {
        CHECK((*connection)->target().is_self());
    }

    // Slot.peer names the connection here: 1 a1, 2 b1, 3 b2, 4 a2, 5 c, 6 d1, 7 d2; the sender of
    // a message is the connection's partner. Counts differ per connection and window.
    struct Link {
        pmr::Connection* connection;
        int id;
        int partner;
    };
    const std::vector<Link> links = {{a1.get(), 1, 2}, {b1.get(), 2, 1}, {b2.get(), 3, 4},
                                     {a2.get(), 4, 3}, {c.get(), 5, 5},  {d1.get(), 6, 6},
                                     {d2.get(), 7, 7}};
    std::vector<BufferedSend<Element>> sends;
    std::vector<BufferedRecv<Element>> recvs;
    std::vector<std::pair<int, std::size_t>> send_slots; // (connection id, window)
    std::vector<std::pair<int, std::size_t>> recv_slots; // (partner id, window)
    sends.reserve(2 * links.size());
    recvs.reserve(2 * links.size());
    for (std::size_t k = 0; k < 2; ++k) {
        // Receive windows first on even windows, send windows first on odd ones.
        for (const Link& link : links) {
            const Memory memory = all_memory[(static_cast<std::size_t>(link.id) + k) % 4];
            if (k == 0) {
                recvs.emplace_back(*link.connection, memory, 24);
                recv_slots.emplace_back(link.partner, k);
            }
            sends.emplace_back(*link.connection, memory,
                               count_of(link.id, me, k, static_cast<std::size_t>(link.id)));
            send_slots.emplace_back(link.id, k);
            if (k == 1) {
                recvs.emplace_back(*link.connection, memory, 24);
                recv_slots.emplace_back(link.partner, k);
            }
        }
    }
    for (const Link& link : links) {
        CHECK(link.connection->provider() == pmr::Provider::self);
    }
    for (int iteration = 0; iteration < 4; ++iteration) {
        const Completion completion = iteration % 2 == 0 ? Completion::test : Completion::wait;
        INFO("iteration " << iteration << " with " << to_string(completion));
        for (std::size_t i = 0; i < sends.size(); ++i) {
            const auto [id, k] = send_slots[i];
            fill_pattern(sends[i]->data(), sends[i]->bytes(),
                         message_seed(test, id, me, k, 0, iteration));
        }
        for (std::size_t i = 0; i < recvs.size(); ++i) {
            fill_pattern(recvs[i]->data(), recvs[i]->bytes(), sentinel_seed(test, i, iteration));
        }
        exchange(sends, recvs, completion);
        for (std::size_t i = 0; i < recvs.size(); ++i) {
            const auto [partner, k] = recv_slots[i];
            const auto& recv = *recvs[i];
            const std::string what = "self connection " + std::to_string(partner) + " -> window " +
                                     std::to_string(k) + ": " + recv.describe();
            INFO(what);
            const std::size_t bytes =
                count_of(partner, me, k, static_cast<std::size_t>(partner)) * sizeof(Element);
            const bool size_ok = recv.received_bytes() == bytes;
            CHECK(recv.received_bytes() == bytes);
            if (!size_ok) {
                continue;
            }
            check_pattern(recv.data(), 0, bytes, message_seed(test, partner, me, k, 0, iteration),
                          what);
            check_pattern(recv.data(), bytes, recv.bytes(), sentinel_seed(test, i, iteration),
                          what + ": bytes behind the message");
        }
    }
}

TEST_CASE("connections on different communicators with equal tags do not mix", "[setup-order]") {
    start_together();
    // The same peer and tags on MPI_COMM_WORLD and on a duplicate of it; created in opposite orders
    // on neighbouring ranks. Slot.copy names the communicator (0 world, 1 duplicate).
    constexpr int test = 6;
    const int me = world_rank();
    const int size = world_size();
    MPI_Comm duplicate = MPI_COMM_NULL;
    MPI_Comm_dup(MPI_COMM_WORLD, &duplicate);
    {
        const int right = (me + 1) % size;
        const int left = (me + size - 1) % size;
        const MPI_Comm comms[2] = {MPI_COMM_WORLD, duplicate};
        std::vector<std::unique_ptr<pmr::Connection>> connections;
        std::vector<std::size_t> copies;
        for (int i = 0; i < 2; ++i) {
            const auto copy = static_cast<std::size_t>(me % 2 == 0 ? i : 1 - i);
            copies.push_back(copy);
            connections.push_back(
                std::make_unique<pmr::Connection>(pmr::Target(comms[copy], right, 4001, 4002)));
            copies.push_back(copy);
            connections.push_back(
                std::make_unique<pmr::Connection>(pmr::Target(comms[copy], left, 4002, 4001)));
        }
        // A message from `from` on its right connection arrives on the left connection of the
        // receiver: name messages by direction (window 0: sent to the right, 1: to the left).
        Windows windows;
        windows.sends.reserve(connections.size());
        windows.recvs.reserve(connections.size());
        for (std::size_t i = 0; i < connections.size(); ++i) {
            const bool to_right = i % 2 == 0;
            const int peer = to_right ? right : left;
            const Memory memory = all_memory[i % all_memory.size()];
            windows.add_send(*connections[i], {peer, to_right ? 0U : 1U, copies[i]}, me, memory);
            windows.add_recv(*connections[i], {peer, to_right ? 1U : 0U, copies[i]}, memory);
        }
        run_and_verify(test, windows, 3);
    }
    MPI_Comm_free(&duplicate);
}

TEST_CASE("connections on a new communicator pair although a freed one had the same handle",
          "[setup-order]") {
    // MPI may hand out the handle of a freed communicator again. Here ranks 0 and 1 connect on a
    // communicator A, free it, then only rank 1 creates (and keeps) another communicator, and all
    // create B: on rank 0, B tends to get A's old handle, on rank 1 not. Connections on B with A's
    // targets must still pair as the first of their kind on B.
    start_together();
    constexpr int test = 7;
    const int me = world_rank();
    const int size = world_size();
    if (size < 2) {
        return;
    }
    const int peer = 1 - me; // for ranks 0 and 1
    const int send_tag = me == 0 ? 0 : 1;
    const int recv_tag = me == 0 ? 1 : 0;
    auto round_trip = [&](MPI_Comm comm, int phase) {
        bool ok = true;
        guarded(ok, [&] {
            pmr::Connection connection(pmr::Target(comm, peer, send_tag, recv_tag));
            std::vector<BufferedSend<Element>> sends;
            std::vector<BufferedRecv<Element>> recvs;
            sends.emplace_back(connection, Memory::owned, 5);
            recvs.emplace_back(connection, Memory::user, 5);
            fill_pattern(sends[0]->data(), sends[0]->bytes(),
                         message_seed(test, me, peer, 0, 0, phase));
            exchange(sends, recvs, Completion::wait);
            REQUIRE(recvs[0]->received_bytes() == sends[0]->bytes());
            check_pattern(recvs[0]->data(), 0, recvs[0]->bytes(),
                          message_seed(test, peer, me, 0, 0, phase), recvs[0]->describe());
        });
    };

    MPI_Comm a = MPI_COMM_NULL;
    MPI_Comm_split(MPI_COMM_WORLD, me < 2 ? 0 : MPI_UNDEFINED, me, &a);
    const MPI_Comm freed = a;
    if (a != MPI_COMM_NULL) {
        round_trip(a, 0);
        MPI_Comm_free(&a);
    }
    MPI_Comm only_rank_1 = MPI_COMM_NULL;
    MPI_Comm_split(MPI_COMM_WORLD, me == 1 ? 0 : MPI_UNDEFINED, me, &only_rank_1);
    MPI_Comm b = MPI_COMM_NULL;
    MPI_Comm_dup(MPI_COMM_WORLD, &b);
    if (me < 2) {
        INFO("rank " << me << ": the new communicator "
                     << (b == freed ? "reuses" : "does not reuse")
                     << " the handle of the freed one");
        round_trip(b, 1);
    }
    MPI_Comm_free(&b);
    if (only_rank_1 != MPI_COMM_NULL) {
        MPI_Comm_free(&only_rank_1);
    }
}
