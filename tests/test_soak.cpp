// SPDX-License-Identifier: MIT
// A million verified rounds between two ranks: every message of every round is checked, with the
// sizes cycling through the inline, direct, cross-memory-attach and staging paths. Registered under
// the CTest label `soak`, which CI runs in the optimised build. Rank 0 prints the rounds per
// second.
//
// tests/netns_hosts.sh runs the same rounds between emulated hosts over faulty links (loss, delay,
// reordering: PMR_SOAK_ROUNDS sets the count), and the hidden case [.link-down], whose link goes
// down for good while it runs: both sides must end in pmr::Timeout or pmr::PeerLost within
// PMR_TIMEOUT, not hang.
#include "support.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>

using namespace pmr_test;

namespace {

/// Two windows over user memory and two owned by the library, each way; one round sends a
/// pattern that names the sender and the round, and counts the wrong elements received.
class VerifiedRounds {
public:
    explicit VerifiedRounds(pmr::Connection& c, int partner)
        : partner_(partner), user_send_(largest / 8), user_recv_(largest / 8),
          send_user_(c, user_send_.data(), user_send_.size()),
          recv_user_(c, user_recv_.data(), user_recv_.size()), send_owned_(c, largest / 8),
          recv_owned_(c, largest / 8) {}

    /// Runs round `round` (from 1) and returns the number of wrong or missing elements.
    long run(long round) {
        // Element counts per round: inline, a cache line, a page, and beyond the CMA threshold.
        constexpr std::size_t counts[] = {1, 29, 8, 512, 2500};
        const std::size_t count = counts[static_cast<std::size_t>(round) % 5];
        const std::uint64_t mine = seed_of({std::uint64_t(world_rank()), std::uint64_t(round)});
        const std::uint64_t theirs = seed_of({std::uint64_t(partner_), std::uint64_t(round)});
        for (std::size_t i = 0; i < count; ++i) {
            user_send_[i] = mine + i;
            send_owned_[i] = ~mine - i;
        }
        recv_user_.init();
        recv_owned_.init();
        send_user_.init();
        send_owned_.init();
        send_user_.post(pmr::Elements{count});
        send_owned_.post(pmr::Elements{count});
        recv_user_.post();
        recv_owned_.post();
        pmr::wait_all(send_user_, send_owned_, recv_user_, recv_owned_);
        long wrong = 0;
        if (recv_user_.received_count() != count || recv_owned_.received_count() != count) {
            ++wrong;
        }
        for (std::size_t i = 0; i < count; ++i) {
            wrong += user_recv_[i] != theirs + i ? 1 : 0;
            wrong += recv_owned_[i] != ~theirs - i ? 1 : 0;
        }
        if (wrong != 0) {
            FAIL_CHECK("round " << round << " of " << count << " elements: " << wrong
                                << " wrong elements");
        }
        return wrong;
    }

private:
    static constexpr std::size_t largest = 20000;
    int partner_;
    std::vector<std::uint64_t> user_send_;
    std::vector<std::uint64_t> user_recv_;
    pmr::SendWindow<std::uint64_t> send_user_;
    pmr::RecvWindow<std::uint64_t> recv_user_;
    pmr::SendWindow<std::uint64_t> send_owned_;
    pmr::RecvWindow<std::uint64_t> recv_owned_;
};

double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

int partner_rank() {
    return world_size() == 2 ? 1 - world_rank() : world_rank();
}

} // namespace

TEST_CASE("a million verified rounds", "[soak]") {
    start_together();
    const long rounds =
        std::strtol(environment("PMR_SOAK_ROUNDS").value_or("1000000").c_str(), nullptr, 10);
    pmr::Connection c(pmr::Target(MPI_COMM_WORLD, partner_rank(), 60, 60));
    VerifiedRounds exchange(c, partner_rank());
    long wrong = 0;
    long done = 0;
    const auto start = std::chrono::steady_clock::now();
    for (long round = 1; round <= rounds && wrong == 0; ++round) {
        wrong += exchange.run(round);
        done = round;
    }
    const double seconds = seconds_since(start);
    if (world_rank() == 0) {
        std::printf("soak: %ld verified rounds in %.2f s: %.0f rounds/s, %ld wrong elements\n",
                    done, seconds, static_cast<double>(done) / seconds, wrong);
        std::fflush(stdout);
    }
    CHECK(done == rounds);
    CHECK(wrong == 0);
}

// Verified rounds until the link to the partner goes down (tests/netns_hosts.sh sets it down once
// both ranks have printed "link-down: running"): the round in flight must end in Timeout or
// PeerLost within PMR_TIMEOUT (plus a margin for scheduling), with every earlier round correct.
TEST_CASE("a link that goes down ends the wait within PMR_TIMEOUT", "[.link-down]") {
    const double limit = std::strtod(environment("PMR_TIMEOUT").value_or("0").c_str(), nullptr);
    REQUIRE(limit > 0); // without a deadline a dead link waits forever, by design
    const double patience =
        std::strtod(environment("PMR_SOAK_LINK_DOWN_WAIT").value_or("120").c_str(), nullptr);
    start_together();
    long round = 1;
    long wrong = 0;
    std::string outcome;
    double stalled = 0;
    std::chrono::steady_clock::time_point failed;
    {
        pmr::Connection c(pmr::Target(MPI_COMM_WORLD, partner_rank(), 60, 60));
        VerifiedRounds exchange(c, partner_rank());
        const auto start = std::chrono::steady_clock::now();
        for (; wrong == 0; ++round) {
            if (round == 200) {
                std::printf("link-down: rank %d running\n", world_rank());
                std::fflush(stdout);
            }
            const auto begun = std::chrono::steady_clock::now();
            try {
                wrong += exchange.run(round);
            } catch (const pmr::Timeout& e) {
                outcome = std::string("Timeout: ") + e.what();
            } catch (const pmr::PeerLost& e) {
                outcome = std::string("PeerLost: ") + e.what();
            }
            if (!outcome.empty()) {
                failed = std::chrono::steady_clock::now();
                stalled = seconds_since(begun);
                break;
            }
            if (seconds_since(start) > patience) {
                FAIL("the link did not go down within " << patience << " s (round " << round
                                                        << ")");
            }
        }
        std::printf("link-down: rank %d ended in %s after %.2f s in round %ld (PMR_TIMEOUT=%g)\n",
                    world_rank(), outcome.c_str(), stalled, round, limit);
        std::fflush(stdout);
    }
    // The windows and the connection are gone: how long their teardown over the dead link took.
    std::printf("link-down: rank %d closed its windows and connection %.2f s after the error\n",
                world_rank(), seconds_since(failed));
    std::fflush(stdout);
    CHECK(wrong == 0);
    CHECK(round > 200);
    CHECK(stalled <= limit + 5.0);
}
