// SPDX-License-Identifier: MIT
// Connections used from several threads at once (one connection per thread), and, with
// PMR_CHECKS=1, a window used by two threads at once reported as a UsageError. Built and run under
// ThreadSanitizer in CI (PMR_SANITIZE=thread).
#include "support.hpp"

#include <atomic>
#include <thread>
#include <vector>

using namespace pmr_test;

namespace {

int partner() {
    return world_size() == 2 ? 1 - world_rank() : world_rank();
}

} // namespace

namespace {

// One connection per thread (tags from `tag`), `count` elements a window, all threads exchanging.
void exchange_on_threads(int threads, int rounds, std::size_t count, int tag) {
    start_together();
    // Set-up on this thread (construction and first use call MPI); the rounds run on the others.
    std::vector<pmr::Connection> connections;
    connections.reserve(static_cast<std::size_t>(threads));
    for (int t = 0; t < threads; ++t) {
        connections.emplace_back(pmr::Target(MPI_COMM_WORLD, partner(), tag + t, tag + t));
    }
    std::vector<pmr::SendWindow<std::uint64_t>> sends;
    std::vector<pmr::RecvWindow<std::uint64_t>> recvs;
    for (auto& c : connections) {
        sends.emplace_back(c, count);
        recvs.emplace_back(c, count);
    }
    for (int t = 0; t < threads; ++t) {
        connections[static_cast<std::size_t>(t)].establish();
    }
    std::atomic<int> wrong{0};
    std::vector<std::thread> workers;
    workers.reserve(static_cast<std::size_t>(threads));
    for (int t = 0; t < threads; ++t) {
        workers.emplace_back([&, t] {
            auto& send = sends[static_cast<std::size_t>(t)];
            auto& recv = recvs[static_cast<std::size_t>(t)];
            for (int round = 1; round <= rounds; ++round) {
                const std::uint64_t value =
                    seed_of({std::uint64_t(world_rank()), std::uint64_t(t), std::uint64_t(round)});
                const std::uint64_t expected =
                    seed_of({std::uint64_t(partner()), std::uint64_t(t), std::uint64_t(round)});
                // Every element differs (value + index) and every element is checked: a piece
                // lost, repeated or delivered from another round or thread shows.
                for (std::size_t i = 0; i < send.size(); ++i) {
                    send[i] = value + i;
                }
                recv.init();
                send.init();
                send.post();
                recv.post();
                pmr::wait_all(send, recv);
                for (std::size_t i = 0; i < recv.size(); ++i) {
                    if (recv[i] != expected + i) {
                        ++wrong;
                        break;
                    }
                }
            }
        });
    }
    for (auto& w : workers) {
        w.join();
    }
    CHECK(wrong == 0);
}

} // namespace

TEST_CASE("one connection per thread, all threads exchanging at once", "[threads]") {
    exchange_on_threads(4, 300, 5000, 100);
}

TEST_CASE("large windows on one connection per thread, all threads exchanging at once",
          "[threads]") {
    // Over UCX's TCP transport windows above 64 KiB share pmr's TCP lane to the peer
    // (providers/ucx/lanes.hpp): concurrent sends on one lane, reads by whichever thread polls.
    exchange_on_threads(3, 60, 20000, 200);
}

TEST_CASE("with PMR_CHECKS, a window used by two threads at once is a UsageError", "[threads]") {
    start_together();
    if (environment("PMR_CHECKS").value_or("0") != "1") {
        return; // registered with PMR_CHECKS=1 (checks cost a little on the data path)
    }
    pmr::Connection a(pmr::Target(MPI_COMM_WORLD, world_rank(), 7, 8));
    pmr::Connection b(pmr::Target(MPI_COMM_WORLD, world_rank(), 8, 7));
    pmr::SendWindow<int> send(a, 10);
    pmr::RecvWindow<int> recv(b, 10);
    recv.init();
    recv.post();
    std::atomic<bool> waiting{false};
    std::thread waiter([&] {
        waiting = true;
        recv.wait(); // until the send below
    });
    while (!waiting) {
        std::this_thread::yield();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50)); // inside wait() by now
    auto message = message_of<pmr::UsageError>([&] { (void)recv.test(); });
    CHECK(message.find("two threads at once") != std::string::npos);
    send.init();
    send.post();
    send.wait();
    waiter.join();
}
