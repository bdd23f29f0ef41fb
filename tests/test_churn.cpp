// SPDX-License-Identifier: MIT
// Objects created and destroyed many times, used or never used, release everything they took:
// open files and resident memory stay flat, whichever provider carries the connection.
#include "support.hpp"

#include <cstdio>
#include <cstdlib>
#include <dirent.h>
#include <fstream>
#include <string>
#include <unistd.h>

using namespace pmr_test;

namespace {

std::size_t open_files() {
    std::size_t n = 0;
    if (DIR* d = opendir("/proc/self/fd")) {
        while (readdir(d) != nullptr) {
            ++n;
        }
        closedir(d);
    }
    return n;
}

/// Resident memory in bytes (/proc/self/statm).
std::size_t resident_bytes() {
    std::size_t pages = 0;
    std::size_t resident = 0;
    std::ifstream("/proc/self/statm") >> pages >> resident;
    return resident * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
}

/// A library-owned and a user-buffer window each way on `c`, used for one round or not at all,
/// then destroyed (also on the partner, in the same order).
void windows(const pmr::Connection& c, bool use) {
    std::vector<char> user_send(70000);
    std::vector<char> user_recv(70000);
    pmr::SendWindow<char> send_owned(c, 4096);
    pmr::SendWindow<char> send_user(c, user_send.data(), user_send.size());
    pmr::RecvWindow<char> recv_owned(c, 4096);
    pmr::RecvWindow<char> recv_user(c, user_recv.data(), user_recv.size());
    if (use) {
        recv_owned.init();
        recv_user.init();
        send_owned.init();
        send_user.init();
        send_owned.post();
        send_user.post();
        recv_owned.post();
        recv_user.post();
        pmr::wait_all(send_owned, send_user, recv_owned, recv_user);
    }
}

/// One cycle: a connection to the partner with windows(), then destroyed.
void cycle(int partner, bool use) {
    pmr::Connection c(pmr::Target(MPI_COMM_WORLD, partner, 50, 50));
    windows(c, use);
}

int partner_rank() {
    return world_size() == 2 ? 1 - world_rank() : world_rank();
}

/// Cycles in a test case: PMR_TEST_CHURN_CYCLES, else `fallback`.
int cycle_count(int fallback) {
    const char* count = std::getenv("PMR_TEST_CHURN_CYCLES");
    return count != nullptr ? std::stoi(count) : fallback;
}

/// Runs `cycles` cycles of `one()` twice: the first time to warm up (the first cycles create what
/// is kept for good: MPI's pools and queues grow to their high-water mark, providers create their
/// process state), then between two measurements, which `settle()` precedes. A leak grows on.
/// Barriers keep the ranks within 10 cycles of each other: a rank far ahead fills its partner's
/// MPI queues with the set-up messages of unused cycles, and MPI's pools (Open MPI's fragments in
/// its shared-memory segment and its request lists) keep what they grew to for the highest
/// backlog so far, which is not pmr's leak (every 50 cycles, UCX's unused cycles grew 180-716 KiB
/// per 2000 cycles that way; every 10 cycles, 0-64 KiB).
template <class One, class Settle>
void measure(const char* what, bool used, int cycles, One&& one, Settle&& settle) {
    auto cycles_in_step = [&] {
        for (int i = 0; i < cycles; ++i) {
            one();
            if (i % 10 == 9) {
                MPI_Barrier(MPI_COMM_WORLD);
            }
        }
        MPI_Barrier(MPI_COMM_WORLD);
        settle();
        MPI_Barrier(MPI_COMM_WORLD);
    };
    cycles_in_step();
    const std::size_t files = open_files();
    const std::size_t resident = resident_bytes();
    cycles_in_step();
    const std::size_t files_after = open_files();
    std::size_t resident_after = resident_bytes();
    long grown_kib = (static_cast<long>(resident_after) - static_cast<long>(resident)) / 1024;
    // One line per rank in the test's log, to see how close a provider comes to its allowance.
    std::printf(
        "rank %d, %d cycles %s: open files %zu -> %zu, resident %zu -> %zu KiB (%+ld KiB)\n",
        world_rank(), cycles, what, files, files_after, resident / 1024, resident_after / 1024,
        grown_kib);
    INFO(cycles << " cycles " << what << ": open files " << files << " -> " << files_after
                << ", resident " << resident / 1024 << " KiB -> " << resident_after / 1024
                << " KiB");
    // One window whose peer's withdrawal has not arrived yet may still hold its memory files (tofu:
    // 3; a CI run measured 21 -> 24 on one rank and 24 -> 21 on the other): a leak grows by
    // thousands over 2000 cycles.
    CHECK(files_after <= files + 4);
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    // The sanitizers keep freed memory in quarantine (256 MB by default), so resident memory grows
    // with every free; the optimised build, which CI runs too, checks it.
    WARN("resident memory not checked in a sanitizer build (its quarantine keeps freed memory)");
    (void)used;
#else
    // Used cycles end in step, so memory comes back to the byte (0 KiB growth on every provider);
    // unused cycles leave MPI's queues a backlog of set-up messages whose high-water mark may
    // still rise (Open MPI's free lists and shared-memory segment, bounded: UCX 0-64 KiB per 2000
    // cycles, shm and tofu up to 308 KiB in a CI run). A leak of 33 B per used cycle of a new
    // connection, or 512 B per unused cycle, fails (the withdrawal leak this test found was 6.5-23
    // KB per unused cycle). PMR_TEST_CHURN_KIB sets another allowance.
    const char* allowance = std::getenv("PMR_TEST_CHURN_KIB");
    const std::size_t allowed_kib =
        allowance != nullptr ? std::stoul(allowance) : (used ? 64 : 1024);
    // That high-water mark depends on how far the ranks drift apart, which a loaded machine
    // stretches (a CI run beside other work: +1,152 KiB in one step, 0-312 KiB alone). Where
    // unused cycles grew past the allowance, the next step decides: a leak grows in every step,
    // a backlog's high-water mark does not rise again and again (every rank takes the same
    // decision, so that both run the extra step and its barriers).
    if (!used) {
        int over = resident_after > resident + allowed_kib * 1024 ? 1 : 0;
        MPI_Allreduce(MPI_IN_PLACE, &over, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (over != 0) {
            const std::size_t resident_before = resident_after;
            cycles_in_step();
            resident_after = resident_bytes();
            grown_kib =
                (static_cast<long>(resident_after) - static_cast<long>(resident_before)) / 1024;
            std::printf("rank %d, %d more cycles %s: resident %zu -> %zu KiB (%+ld KiB)\n",
                        world_rank(), cycles, what, resident_before / 1024, resident_after / 1024,
                        grown_kib);
            INFO("the next " << cycles << " cycles: resident " << resident_before / 1024
                             << " KiB -> " << resident_after / 1024 << " KiB");
            CHECK(resident_after <= resident_before + allowed_kib * 1024);
            return;
        }
    }
    CHECK(resident_after <= resident + allowed_kib * 1024);
#endif
}

void churn(bool use, int cycles) {
    start_together();
    const int partner = partner_rank();
    // A used cycle drains what the partner sent for the last unused cycles.
    measure(
        use ? "with use" : "without use", use, cycles, [&] { cycle(partner, use); },
        [&] { cycle(partner, true); });
}

/// Windows come and go on one connection that lives on (the windows of a cycle pair with the
/// partner's windows of the same cycle).
void churn_on_one_connection(bool use, int cycles) {
    start_together();
    const pmr::Connection c(pmr::Target(MPI_COMM_WORLD, partner_rank(), 51, 51));
    // Without use, nothing but the windows' own set-up calls reads what the peer sends on the
    // connection: one more unused cycle takes in what the partner sent before the barrier, so
    // that both measurements see at most one cycle's windows waiting for the partner's word.
    measure(
        use ? "with use on one connection" : "without use on one connection", use, cycles,
        [&] { windows(c, use); },
        [&] {
            if (!use) {
                windows(c, false);
            }
        });
}

} // namespace

TEST_CASE("create, use, destroy: files and memory stay flat", "[churn]") {
    churn(true, cycle_count(2000));
}

TEST_CASE("create and destroy without use: files and memory stay flat", "[churn][unused]") {
    churn(false, cycle_count(2000));
}

TEST_CASE("windows created, used and destroyed on one connection: files and memory stay flat",
          "[churn]") {
    churn_on_one_connection(true, cycle_count(2000) / 4);
}

TEST_CASE("windows created and destroyed unused on one connection: files and memory stay flat",
          "[churn][unused]") {
    churn_on_one_connection(false, cycle_count(2000));
}
