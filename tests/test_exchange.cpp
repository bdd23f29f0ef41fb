// SPDX-License-Identifier: MIT
// Ring exchanges on MPI_COMM_WORLD: every rank talks to both ring neighbours (itself on one rank,
// the same peer over two tag pairs on two ranks). Covers message sizes from 0 B to several MiB,
// several windows per connection, partial posts, every kind of buffer, wait() and test() polling,
// and many iterations with data that changes every time; the receiver checks every byte, and that
// bytes beyond the message were not touched.
//
// CTest also runs this file with PMR_PROVIDER=shm (and PMR_SHM_CMA=0, the shared-memory staging
// path), and the hidden [provider-env] case with an unknown PMR_PROVIDER.
#include "support.hpp"

#include <pmr/pmr.hpp>

#include <catch2/catch.hpp>
#include <mpi.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>
#include <vector>

using namespace pmr_test;

namespace {

constexpr std::size_t KiB = 1024;
constexpr std::size_t MiB = 1024 * KiB;

/// Connection 0 goes to the right neighbour, connection 1 to the left one. The right connection of
/// rank q pairs with the left connection of rank q + 1.
struct Ring {
    explicit Ring(int tag_base)
        : rank(world_rank()),
          size(world_size()), peers{(rank + 1) % size, (rank + size - 1) % size},
          connections{
              pmr::Connection(pmr::Target(MPI_COMM_WORLD, peers[0], tag_base, tag_base + 1)),
              pmr::Connection(pmr::Target(MPI_COMM_WORLD, peers[1], tag_base + 1, tag_base))} {}

    /// The connection on the peer of connection `c` that pairs with it.
    static int partner(int c) { return 1 - c; }

    int rank;
    int size;
    std::array<int, 2> peers;
    std::array<pmr::Connection, 2> connections;
};

std::string where(int rank, int connection, std::size_t window, int iteration) {
    return "rank " + std::to_string(rank) + ", connection " + std::to_string(connection) +
           ", window " + std::to_string(window) + ", iteration " + std::to_string(iteration);
}

/// Seed of the message `sender` sends on its connection `connection`, window `window`.
std::uint64_t message_seed(int test, int sender, int connection, std::size_t window,
                           int iteration) {
    return seed_of({static_cast<std::uint64_t>(test), static_cast<std::uint64_t>(sender),
                    static_cast<std::uint64_t>(connection), window,
                    static_cast<std::uint64_t>(iteration)});
}

/// What the receiver leaves in its buffer before init(); must survive beyond the message.
std::uint64_t sentinel_seed(int test, int receiver, int connection, std::size_t window,
                            int iteration) {
    return seed_of({0xdeadULL, static_cast<std::uint64_t>(test),
                    static_cast<std::uint64_t>(receiver), static_cast<std::uint64_t>(connection),
                    window, static_cast<std::uint64_t>(iteration)});
}

/// Windows of element type T on both ring connections: `counts[k]` elements in the k-th send
/// window, `counts[k] + slack(k)` in the k-th receive window, memory kinds rotating.
template <class T>
struct RingWindows {
    RingWindows(Ring& ring, const std::vector<std::size_t>& counts, std::size_t slack_modulus)
        : per_connection(counts.size()) {
        sends.reserve(2 * counts.size());
        recvs.reserve(2 * counts.size());
        for (int c = 0; c < 2; ++c) {
            for (std::size_t k = 0; k < counts.size(); ++k) {
                sends.emplace_back(ring.connections[c], all_memory[(k + c) % 4], counts[k]);
                recvs.emplace_back(ring.connections[c], all_memory[(k + c + 1) % 4],
                                   counts[k] + k % slack_modulus);
            }
        }
        for (auto& send : sends) {
            send.check_fresh();
        }
        for (auto& recv : recvs) {
            recv.check_fresh();
        }
    }
    int connection(std::size_t i) const { return static_cast<int>(i / per_connection); }
    std::size_t window(std::size_t i) const { return i % per_connection; }

    std::size_t per_connection;
    std::vector<BufferedSend<T>> sends;
    std::vector<BufferedRecv<T>> recvs;
};

/// Fills every send window with its message and every receive window with its sentinel.
template <class T>
void prepare(int test, Ring& ring, RingWindows<T>& windows, int iteration) {
    for (std::size_t i = 0; i < windows.sends.size(); ++i) {
        fill_pattern(
            windows.sends[i]->data(), windows.sends[i]->bytes(),
            message_seed(test, ring.rank, windows.connection(i), windows.window(i), iteration));
    }
    for (std::size_t i = 0; i < windows.recvs.size(); ++i) {
        fill_pattern(
            windows.recvs[i]->data(), windows.recvs[i]->bytes(),
            sentinel_seed(test, ring.rank, windows.connection(i), windows.window(i), iteration));
    }
}

/// Checks every receive window: `expected_bytes(i)` bytes of the partner's message, the sentinel
/// behind them; and every send window still holding its message.
template <class T, class ExpectedBytes>
void verify(int test, Ring& ring, RingWindows<T>& windows, int iteration,
            ExpectedBytes&& expected_bytes) {
    for (std::size_t i = 0; i < windows.recvs.size(); ++i) {
        auto& recv = *windows.recvs[i];
        const int c = windows.connection(i);
        const std::size_t k = windows.window(i);
        const std::size_t bytes = expected_bytes(i);
        const std::string what = where(ring.rank, c, k, iteration) + ", receive " + recv.describe();
        INFO(what);
        const bool size_ok = recv.received_bytes() == bytes;
        CHECK(recv.received_bytes() == bytes);
        CHECK(recv.received_count() == bytes / sizeof(T));
        if (!size_ok) {
            continue;
        }
        check_pattern(recv.data(), 0, bytes,
                      message_seed(test, ring.peers[c], Ring::partner(c), k, iteration),
                      what + ": message");
        check_pattern(recv.data(), bytes, recv.bytes(),
                      sentinel_seed(test, ring.rank, c, k, iteration),
                      what + ": bytes behind the message");
    }
    for (std::size_t i = 0; i < windows.sends.size(); ++i) {
        auto& send = *windows.sends[i];
        check_pattern(
            send.data(), 0, send.bytes(),
            message_seed(test, ring.rank, windows.connection(i), windows.window(i), iteration),
            where(ring.rank, windows.connection(i), windows.window(i), iteration) +
                ": send buffer changed by the transfer");
    }
}

} // namespace

TEST_CASE("ring connections pick the expected providers", "[exchange]") {
    start_together();
    Ring ring(100);
    for (auto& connection : ring.connections) {
        check_provider(connection);
        CHECK(connection.rails() >= 1);
        CHECK_FALSE(connection.describe().empty());
    }
    CHECK(ring.connections[0].peer() == ring.peers[0]);
    CHECK(ring.connections[1].peer() == ring.peers[1]);
    // Establish both before destruction so that no peer is left waiting for a handshake.
    ring.connections[0].establish();
    ring.connections[1].establish();
}

TEST_CASE("ring exchange of every size from 0 B to 4 MiB over every kind of buffer", "[exchange]") {
    start_together();
    constexpr int test = 1;
    // Around inline and small-message thresholds, a page, odd sizes behind 64 KiB and 3 MiB, large.
    const std::vector<std::size_t> sizes = {
        0,      1, 7, 8, 63, 64, 65, 255, 256, 257, 4 * KiB, 64 * KiB + 3, 1 * MiB, 3 * MiB + 17,
        4 * MiB};
    Ring ring(200);
    RingWindows<unsigned char> windows(ring, sizes, 3);
    for (auto& connection : ring.connections) {
        check_provider(connection);
    }
    constexpr int iterations = 8;
    for (int iteration = 0; iteration < iterations; ++iteration) {
        const Completion completion = iteration % 2 == 0 ? Completion::wait : Completion::test;
        INFO("iteration " << iteration << " with " << to_string(completion));
        prepare(test, ring, windows, iteration);
        exchange(windows.sends, windows.recvs, completion);
        verify(test, ring, windows, iteration,
               [&](std::size_t i) { return sizes[windows.window(i)]; });
    }
}

TEST_CASE("many iterations on small windows alternating wait() and test()", "[exchange]") {
    start_together();
    constexpr int test = 2;
    const std::vector<std::size_t> counts = {0, 1, 2, 3, 8, 17, 64, 100};
    Ring ring(300);
    RingWindows<std::uint64_t> windows(ring, counts, 2);
    constexpr int iterations = 200;
    for (int iteration = 0; iteration < iterations; ++iteration) {
        const Completion completion = iteration % 3 == 0 ? Completion::wait : Completion::test;
        INFO("iteration " << iteration << " with " << to_string(completion));
        prepare(test, ring, windows, iteration);
        exchange(windows.sends, windows.recvs, completion);
        verify(test, ring, windows, iteration,
               [&](std::size_t i) { return counts[windows.window(i)] * sizeof(std::uint64_t); });
    }
    // After test() returned true the window is back in its initial state: another test() is out of
    // order.
    for (auto& recv : windows.recvs) {
        CHECK_THROWS_AS(recv->test(), pmr::UsageError);
    }
    for (auto& send : windows.sends) {
        CHECK_THROWS_AS(send->test(), pmr::UsageError);
    }
}

namespace {
/// Three bytes, so that byte counts and element counts disagree.
struct Rgb {
    std::uint8_t r;
    std::uint8_t g;
    std::uint8_t b;
};
static_assert(sizeof(Rgb) == 3);
} // namespace

TEMPLATE_TEST_CASE("partial posts deliver exactly the first bytes", "[exchange]", std::uint32_t,
                   Rgb, double) {
    start_together();
    constexpr int test = 3;
    using T = TestType;
    const std::vector<std::size_t> counts = {0, 1, 5, 1100, (1 * MiB) / sizeof(T) + 3};
    // Element counts to post; larger than a window means "the whole window with post()".
    const std::vector<std::size_t> posts = {
        0,       1, 2, 3, 4, 5, 7, 8, 63, 64, 65, 255, 256, 257, 4 * KiB - 3, 4 * KiB, 64 * KiB + 3,
        SIZE_MAX};
    Ring ring(400);
    RingWindows<T> windows(ring, counts, 2);
    // Bytes posted in iteration `iteration` on window `i` (same for sender and receiver).
    auto posted = [&](std::size_t i, int iteration) {
        const std::size_t choice =
            posts[(static_cast<std::size_t>(iteration) + 5 * windows.window(i)) % posts.size()];
        return std::min(choice, counts[windows.window(i)]) * sizeof(T);
    };
    const int iterations = static_cast<int>(posts.size());
    for (int iteration = 0; iteration < iterations; ++iteration) {
        const Completion completion = iteration % 2 == 0 ? Completion::test : Completion::wait;
        INFO("iteration " << iteration << " with " << to_string(completion));
        prepare(test, ring, windows, iteration);
        exchange(windows.sends, windows.recvs, completion,
                 [&](std::size_t i, pmr::SendWindow<T>& send) {
                     const std::size_t bytes = posted(i, iteration);
                     if (bytes == send.bytes() && iteration % 3 == 0) {
                         send.post();
                     } else {
                         send.post(pmr::Elements{bytes / sizeof(T)});
                     }
                 });
        // The receiver on connection c gets what the partner posted on its window of the same
        // index; posted() depends only on the window index, which both sides share.
        verify(test, ring, windows, iteration, [&](std::size_t i) { return posted(i, iteration); });
    }
}

TEST_CASE("typed windows: insert, extract and iterators over every kind of memory", "[exchange]") {
    start_together();
    Ring ring(500);
    const std::vector<std::size_t> counts = {1, 37, 1000, 70000};
    RingWindows<double> windows(ring, counts, 1);
    auto value = [](int sender, int connection, std::size_t window, int iteration,
                    std::size_t index) {
        return static_cast<double>(sender) * 1e9 + connection * 1e8 +
               static_cast<double>(window) * 1e7 + iteration * 1e6 + static_cast<double>(index) +
               0.25;
    };
    for (int iteration = 0; iteration < 4; ++iteration) {
        std::vector<double> message;
        for (std::size_t i = 0; i < windows.sends.size(); ++i) {
            auto& send = *windows.sends[i];
            const int c = windows.connection(i);
            const std::size_t k = windows.window(i);
            message.resize(send.size());
            for (std::size_t j = 0; j < message.size(); ++j) {
                message[j] = value(ring.rank, c, k, iteration, j);
            }
            // The second half through insert() at an offset, the first half through insert().
            const std::size_t half = message.size() / 2;
            send.insert(message.begin() + static_cast<std::ptrdiff_t>(half), message.end(), half);
            send.insert(message.begin(), message.begin() + static_cast<std::ptrdiff_t>(half));
            CHECK_THROWS_AS(send.insert(message.begin(), message.begin() + 1, send.size()),
                            pmr::SizeError);
        }
        for (auto& recv : windows.recvs) {
            std::fill(recv->begin(), recv->end(), -1.0);
        }
        exchange(windows.sends, windows.recvs, Completion::wait);
        for (std::size_t i = 0; i < windows.recvs.size(); ++i) {
            const auto& recv = *windows.recvs[i];
            const int c = windows.connection(i);
            const std::size_t k = windows.window(i);
            INFO(where(ring.rank, c, k, iteration) << ", " << recv.describe());
            REQUIRE(recv.received_count() == counts[k]);
            std::vector<double> got;
            recv.extract(std::back_inserter(got));
            REQUIRE(got.size() == recv.size());
            std::vector<double> expected(counts[k]);
            for (std::size_t j = 0; j < expected.size(); ++j) {
                expected[j] = value(ring.peers[c], Ring::partner(c), k, iteration, j);
            }
            CHECK(std::equal(expected.begin(), expected.end(), recv.cbegin()));
            CHECK(std::equal(expected.begin(), expected.end(), got.begin()));
            double sum_expected = 0;
            double sum_got = 0;
            for (std::size_t j = 0; j < expected.size(); ++j) {
                sum_expected += expected[j];
                sum_got += recv[j];
            }
            CHECK(sum_got == sum_expected);
        }
    }
}

TEST_CASE("zero-size windows synchronise", "[exchange]") {
    start_together();
    constexpr int test = 6;
    bool ok = true;
    // Zero-size windows (library-owned, user buffer, null pointer) beside one small window.
    Ring ring(600);
    std::vector<BufferedSend<int>> sends;
    std::vector<BufferedRecv<int>> recvs;
    for (int c = 0; c < 2; ++c) {
        sends.emplace_back(ring.connections[c], Memory::owned, 0);
        sends.emplace_back(ring.connections[c], Memory::user, 0);
        sends.emplace_back(ring.connections[c], Memory::owned, 4);
        recvs.emplace_back(ring.connections[c], Memory::user, 0);
        recvs.emplace_back(ring.connections[c], Memory::owned, 0);
        recvs.emplace_back(ring.connections[c], Memory::user, 4);
    }
    std::vector<pmr::SendWindow<int>> nullptr_sends;
    std::vector<pmr::RecvWindow<int>> nullptr_recvs;
    for (int c = 0; c < 2; ++c) {
        nullptr_sends.emplace_back(ring.connections[c], nullptr, 0);
        nullptr_recvs.emplace_back(ring.connections[c], nullptr, 0);
    }
    for (int iteration = 0; iteration < 30; ++iteration) {
        INFO("iteration " << iteration);
        guarded(ok, [&] {
            for (std::size_t i = 0; i < sends.size(); ++i) {
                fill_pattern(
                    sends[i]->data(), sends[i]->bytes(),
                    message_seed(test, ring.rank, static_cast<int>(i / 3), i % 3, iteration));
            }
            for (auto& recv : recvs) {
                recv->init();
                recv->post();
            }
            for (auto& recv : nullptr_recvs) {
                recv.init();
                recv.post();
            }
            // Nobody has posted a send of this round yet, so no receive may complete -- also not
            // a zero-size one, and not because of a flag left over from the previous round.
            for (auto& recv : recvs) {
                INFO(recv->describe());
                CHECK_FALSE(recv->test());
            }
            for (auto& recv : nullptr_recvs) {
                INFO(recv.describe());
                CHECK_FALSE(recv.test());
            }
        });
        MPI_Barrier(MPI_COMM_WORLD);
        guarded(ok, [&] {
            for (auto& send : sends) {
                send->init();
                send->post();
            }
            for (auto& send : nullptr_sends) {
                send.init();
                send.post();
            }
            for (auto& send : sends) {
                send->wait();
            }
            for (auto& send : nullptr_sends) {
                send.wait();
            }
            for (std::size_t i = 0; i < recvs.size(); ++i) {
                auto& recv = *recvs[i];
                const int c = static_cast<int>(i / 3);
                if (iteration % 2 == 0) {
                    recv.wait();
                } else {
                    complete_by_test(recv);
                }
                INFO(recv.describe());
                REQUIRE(recv.received_bytes() == recv.bytes());
                check_pattern(recv.data(), 0, recv.bytes(),
                              message_seed(test, ring.peers[c], Ring::partner(c), i % 3, iteration),
                              recv.describe());
            }
            for (auto& recv : nullptr_recvs) {
                recv.wait();
                CHECK(recv.received_bytes() == 0);
                CHECK(recv.received_count() == 0);
            }
        });
    }
}

TEST_CASE("a send window destroyed after its wait() does not fail the receiver", "[exchange]") {
    start_together();
    // Once send.wait() has returned, the sender is done with the round; destroying its window then
    // must not turn the receiver's completed transfer into PeerLost. Typical programs end with a
    // last round and destroy their windows without a barrier.
    constexpr int test = 9;
    bool ok = true;
    Ring ring(800);
    const std::vector<std::size_t> sizes = {8, 64 * KiB + 3, 1 * MiB};
    for (std::size_t k = 0; k < sizes.size(); ++k) {
        const std::size_t bytes = sizes[k];
        INFO(bytes << " B");
        for (const Memory memory : all_memory) {
            INFO("receive buffer: " << to_string(memory));
            std::unique_ptr<BufferedRecv<unsigned char>> recv;
            guarded(ok, [&] {
                auto send = std::make_unique<BufferedSend<unsigned char>>(ring.connections[0],
                                                                          Memory::owned, bytes);
                recv = std::make_unique<BufferedRecv<unsigned char>>(ring.connections[1], memory,
                                                                     bytes);
                fill_pattern((*send)->data(), bytes, message_seed(test, ring.rank, 0, k, 0));
                (*recv)->init();
                (*send)->init();
                (*send)->post();
                (*recv)->post();
                (*send)->wait();
            });
            // Every sender has now destroyed its window.
            MPI_Barrier(MPI_COMM_WORLD);
            guarded(ok, [&] {
                auto& window = **recv;
                window.wait();
                REQUIRE(window.received_bytes() == bytes);
                check_pattern(window.data(), 0, bytes, message_seed(test, ring.peers[1], 0, k, 0),
                              window.describe());
            });
        }
    }
}

TEST_CASE("windows destroyed right after their last round, many times", "[exchange]") {
    start_together();
    // The same without a barrier: the sender of a small message can finish long before its
    // receiver looks, so the receiver often finds the sender's window gone with the data there.
    constexpr int test = 10;
    Ring ring(900);
    for (int repetition = 0; repetition < 200; ++repetition) {
        INFO("repetition " << repetition);
        const std::size_t bytes = repetition % 4 == 3 ? 5000 : 1 + repetition % 100;
        std::vector<BufferedSend<unsigned char>> sends;
        std::vector<BufferedRecv<unsigned char>> recvs;
        sends.emplace_back(ring.connections[0], all_memory[repetition % 4], bytes);
        recvs.emplace_back(ring.connections[1], all_memory[(repetition + 1) % 4], bytes);
        fill_pattern(sends[0]->data(), bytes, message_seed(test, ring.rank, 0, 0, repetition));
        exchange(sends, recvs, repetition % 2 == 0 ? Completion::wait : Completion::test);
        REQUIRE(recvs[0]->received_bytes() == bytes);
        check_pattern(recvs[0]->data(), 0, bytes,
                      message_seed(test, ring.peers[1], 0, 0, repetition), recvs[0]->describe());
    }
}

TEST_CASE("a null connection does nothing", "[exchange]") {
    start_together();
    pmr::Connection connection(pmr::Target(MPI_COMM_WORLD, MPI_PROC_NULL, 7, 8));
    CHECK(connection.target().is_null());
    CHECK(connection.provider() == pmr::Provider::null);
    std::vector<BufferedSend<std::uint16_t>> sends;
    std::vector<BufferedRecv<std::uint16_t>> recvs;
    for (Memory memory : all_memory) {
        sends.emplace_back(connection, memory, 33);
        recvs.emplace_back(connection, memory, 33);
    }
    sends.emplace_back(connection, Memory::owned, 0);
    recvs.emplace_back(connection, Memory::user, 0);
    for (int iteration = 0; iteration < 4; ++iteration) {
        for (std::size_t i = 0; i < recvs.size(); ++i) {
            fill_pattern(recvs[i]->data(), recvs[i]->bytes(), sentinel_seed(7, 0, 0, i, iteration));
        }
        exchange(sends, recvs, iteration % 2 == 0 ? Completion::wait : Completion::test,
                 [&](std::size_t i, pmr::SendWindow<std::uint16_t>& send) {
                     if (i % 2 == 0) {
                         send.post();
                     } else {
                         send.post(pmr::Elements{5});
                     }
                 });
        for (std::size_t i = 0; i < recvs.size(); ++i) {
            CHECK(recvs[i]->received_bytes() == 0);
            check_pattern(recvs[i]->data(), 0, recvs[i]->bytes(),
                          sentinel_seed(7, 0, 0, i, iteration),
                          "receive buffer of a null connection");
        }
    }
}

TEST_CASE("connections forced to a provider", "[exchange]") {
    start_together();
    constexpr int test = 8;
    const auto forced = environment("PMR_PROVIDER");
    std::vector<pmr::Provider> providers;
    if (world_size() == 1) {
        providers.push_back(pmr::Provider::self);
    } else {
        for (pmr::Provider provider : runnable_providers()) {
            if (provider == pmr::Provider::null || provider == pmr::Provider::self) {
                continue;
            }
            // The environment forces every inter-process connection; do not contradict it.
            if (forced && *forced != pmr::to_string(provider)) {
                continue;
            }
            providers.push_back(provider);
        }
    }
    REQUIRE_FALSE(providers.empty());
    int tag = 700;
    for (pmr::Provider provider : providers) {
        INFO("forced provider " << pmr::to_string(provider));
        const int rank = world_rank();
        const int size = world_size();
        const int right = (rank + 1) % size;
        const int left = (rank + size - 1) % size;
        std::array<pmr::Connection, 2> connections = {
            pmr::Connection(pmr::Target(MPI_COMM_WORLD, right, tag, tag + 1), provider),
            pmr::Connection(pmr::Target(MPI_COMM_WORLD, left, tag + 1, tag), provider)};
        tag += 2;
        const std::array<int, 2> peers = {right, left};
        std::vector<BufferedSend<std::uint32_t>> sends;
        std::vector<BufferedRecv<std::uint32_t>> recvs;
        const std::vector<std::size_t> counts = {0, 3, 1000, 300000};
        for (int c = 0; c < 2; ++c) {
            for (std::size_t k = 0; k < counts.size(); ++k) {
                sends.emplace_back(connections[c], all_memory[k], counts[k]);
                recvs.emplace_back(connections[c], all_memory[3 - k], counts[k]);
            }
        }
        for (auto& connection : connections) {
            CHECK(connection.provider() == provider);
        }
        for (int iteration = 0; iteration < 3; ++iteration) {
            for (std::size_t i = 0; i < sends.size(); ++i) {
                fill_pattern(sends[i]->data(), sends[i]->bytes(),
                             message_seed(test, rank, static_cast<int>(i / counts.size()),
                                          i % counts.size(), iteration));
            }
            exchange(sends, recvs, iteration == 1 ? Completion::test : Completion::wait);
            for (std::size_t i = 0; i < recvs.size(); ++i) {
                const int c = static_cast<int>(i / counts.size());
                const std::size_t k = i % counts.size();
                REQUIRE(recvs[i]->received_count() == counts[k]);
                check_pattern(recvs[i]->data(), 0, recvs[i]->bytes(),
                              message_seed(test, peers[c], 1 - c, k, iteration),
                              where(rank, c, k, iteration));
            }
        }
    }
}

// Run by CTest as test_exchange.forced_unknown with PMR_PROVIDER=carrier-pigeon; hidden otherwise.
TEST_CASE("an unknown PMR_PROVIDER is rejected with the list of compiled providers",
          "[.][provider-env]") {
    const auto forced = environment("PMR_PROVIDER");
    REQUIRE(forced.has_value());
    INFO("PMR_PROVIDER=" << *forced);
    REQUIRE_FALSE(pmr::provider_from_string(*forced).has_value());
    const int size = world_size();
    if (size == 1) {
        WARN("PMR_PROVIDER only affects inter-process connections: needs at least 2 ranks");
        return;
    }
    const int rank = world_rank();
    // Pairs of ranks, so that every rank does the same whichever of construction and establish()
    // throws.
    const int peer = rank ^ 1;
    if (peer >= size) {
        WARN("odd rank count: the last rank has no partner");
        return;
    }
    bool thrown = false;
    std::string message;
    try {
        pmr::Connection connection(pmr::Target(MPI_COMM_WORLD, peer, 9, 9));
        connection.establish();
        (void)connection.provider();
    } catch (const pmr::ArgumentError& error) {
        thrown = true;
        message = error.what();
    }
    INFO("message: " << message);
    REQUIRE(thrown);
    CHECK_THAT(message, Catch::Contains(pmr::compiled_providers_string()));
    for (pmr::Provider provider : pmr::compiled_providers()) {
        CHECK_THAT(message, Catch::Contains(std::string(pmr::to_string(provider))));
    }
    CHECK_THAT(message, Catch::Contains(*forced));
}
