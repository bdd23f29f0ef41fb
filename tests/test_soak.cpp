// SPDX-License-Identifier: MIT
// A million verified rounds between two ranks: every message of every round is checked, with the
// sizes cycling through the inline, direct, cross-memory-attach and staging paths. Registered under
// the CTest label `soak`, which CI runs in the optimised build.
#include "support.hpp"

#include <cstdlib>

using namespace pmr_test;

TEST_CASE("a million verified rounds", "[soak]") {
    start_together();
    const int partner = world_size() == 2 ? 1 - world_rank() : world_rank();
    const long rounds =
        std::strtol(environment("PMR_SOAK_ROUNDS").value_or("1000000").c_str(), nullptr, 10);
    pmr::Connection c(pmr::Target(MPI_COMM_WORLD, partner, 60, 60));
    constexpr std::size_t largest = 20000;
    std::vector<std::uint64_t> user_send(largest / 8);
    std::vector<std::uint64_t> user_recv(largest / 8);
    pmr::SendWindow<std::uint64_t> send_user(c, user_send.data(), user_send.size());
    pmr::RecvWindow<std::uint64_t> recv_user(c, user_recv.data(), user_recv.size());
    pmr::SendWindow<std::uint64_t> send_owned(c, largest / 8);
    pmr::RecvWindow<std::uint64_t> recv_owned(c, largest / 8);
    // Element counts per round: inline, a cache line, a page, and beyond the CMA threshold.
    const std::size_t counts[] = {1, 29, 8, 512, 2500};
    long wrong = 0;
    for (long round = 1; round <= rounds && wrong == 0; ++round) {
        const std::size_t count = counts[static_cast<std::size_t>(round) % 5];
        const std::uint64_t mine = seed_of({std::uint64_t(world_rank()), std::uint64_t(round)});
        const std::uint64_t theirs = seed_of({std::uint64_t(partner), std::uint64_t(round)});
        for (std::size_t i = 0; i < count; ++i) {
            user_send[i] = mine + i;
            send_owned[i] = ~mine - i;
        }
        recv_user.init();
        recv_owned.init();
        send_user.init();
        send_owned.init();
        send_user.post(count * 8);
        send_owned.post(count * 8);
        recv_user.post();
        recv_owned.post();
        pmr::wait_all(send_user, send_owned, recv_user, recv_owned);
        if (recv_user.received_count() != count || recv_owned.received_count() != count) {
            ++wrong;
        }
        for (std::size_t i = 0; i < count; ++i) {
            wrong += user_recv[i] != theirs + i ? 1 : 0;
            wrong += recv_owned[i] != ~theirs - i ? 1 : 0;
        }
        if (wrong != 0) {
            FAIL_CHECK("round " << round << " of " << count << " elements: " << wrong
                                << " wrong elements");
        }
    }
    CHECK(wrong == 0);
}
