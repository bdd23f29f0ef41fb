// SPDX-License-Identifier: MIT
// Bad input between two ranks: each case ends in a pmr::Error with a useful message on the ranks
// involved, never in a hang or a write outside a receive window.
#include "support.hpp"

#include "bootstrap/mpi_process.hpp"
#include "bootstrap/setup_link.hpp"

#include <catch2/catch.hpp>

#include <pmr/pmr.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <string>
#include <unistd.h>
#include <vector>

using pmr_test::message_of;

namespace {

// Short deadline for the cases that must time out, and an early warning for a stuck set-up. Set
// before pmr reads its settings.
const bool short_timeout = []() noexcept {
    return setenv("PMR_TIMEOUT", "2", 1) == 0 && setenv("PMR_WARN_AFTER", "0.5", 1) == 0;
}();

/// What `f` writes to stderr (file descriptor 2, where pmr warns).
template <class F>
std::string stderr_of(F&& f) {
    std::fflush(stderr);
    char path[] = "/tmp/pmr-stderr-XXXXXX";
    const int file = mkstemp(path);
    REQUIRE(file >= 0);
    const int saved = dup(2);
    dup2(file, 2);
    try {
        f();
    } catch (...) {
        std::fflush(stderr);
        dup2(saved, 2);
        close(saved);
        close(file);
        unlink(path);
        throw;
    }
    std::fflush(stderr);
    dup2(saved, 2);
    close(saved);
    std::string text;
    char buffer[4096];
    lseek(file, 0, SEEK_SET);
    for (ssize_t n; (n = read(file, buffer, sizeof buffer)) > 0;) {
        text.append(buffer, static_cast<std::size_t>(n));
    }
    close(file);
    unlink(path);
    return text;
}

struct Ranks {
    int me = 0;
    int peer = 0;
    Ranks() {
        MPI_Comm_rank(MPI_COMM_WORLD, &me);
        peer = 1 - me;
    }
};

constexpr unsigned char guard = 0xA5;

} // namespace

TEST_CASE("a send window larger than the peer's receive window fails on both sides", "[errors]") {
    REQUIRE(short_timeout);
    Ranks r;
    pmr::Connection c(pmr::Target(MPI_COMM_WORLD, r.peer, 20, 20));
    // Rank 0 sends 100 B to rank 1, which only offers 64 B, inside a guarded buffer.
    std::vector<unsigned char> memory(64 + 2 * 64, guard);
    pmr::SendWindow<unsigned char> send(c, r.me == 0 ? 100 : 64);
    pmr::RecvWindow<unsigned char> recv(c, memory.data() + 64, 64);
    MPI_Barrier(MPI_COMM_WORLD); // both sides constructed: only the size can fail below
    // The other pair of this connection (rank 1 -> rank 0, 64 B -> 64 B) is fine and unused.
    if (r.me == 0) {
        auto m = message_of<pmr::SizeError>([&] { send.init(); });
        CHECK(m.find("100 B") != std::string::npos);
        CHECK(m.find("64 B") != std::string::npos);
        CHECK(m.find("peer 1") != std::string::npos);
    } else {
        auto n = message_of<pmr::SizeError>([&] { recv.init(); });
        CHECK(n.find("larger than the peer's receive window") != std::string::npos);
    }
    for (std::size_t i = 0; i < memory.size(); ++i) {
        if (i < 64 || i >= 128) {
            REQUIRE(memory[i] == guard);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

TEST_CASE("the two sides force different providers", "[errors]") {
    Ranks r;
    if (!pmr::is_compiled(pmr::Provider::shm)) {
        WARN("shm is not compiled in: nothing to force");
        return;
    }
    // Rank 0 forces shm, rank 1 forces nothing: both learn it when the handshake completes.
    const pmr::Target target(MPI_COMM_WORLD, r.peer, 21, 21);
    pmr::Connection c =
        r.me == 0 ? pmr::Connection(target, pmr::Provider::shm) : pmr::Connection(target);
    MPI_Barrier(MPI_COMM_WORLD);
    auto m = message_of<pmr::ArgumentError>([&] { c.establish(); });
    CHECK(m.find("forces") != std::string::npos);
    MPI_Barrier(MPI_COMM_WORLD);
}

TEST_CASE("a peer that never creates the matching window gives Timeout", "[errors]") {
    Ranks r;
    pmr::Connection c(pmr::Target(MPI_COMM_WORLD, r.peer, 22, 22));
    MPI_Barrier(MPI_COMM_WORLD);
    c.establish();
    if (r.me == 0) {
        pmr::SendWindow<int> send(c, 10); // rank 1 creates no receive window
        auto start = std::chrono::steady_clock::now();
        auto m = message_of<pmr::Timeout>([&] { send.init(); });
        auto seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        CHECK(seconds < 10);
        CHECK(m.find("send window #0") != std::string::npos);
        CHECK(m.find("peer 1") != std::string::npos);
        CHECK(m.find("matching") != std::string::npos);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

TEST_CASE("a window whose partner the peer destroyed unused gives UsageError", "[errors]") {
    REQUIRE(short_timeout);
    Ranks r;
    pmr::Connection c(pmr::Target(MPI_COMM_WORLD, r.peer, 23, 23));
    c.establish();
    if (r.me == 0) {
        pmr::SendWindow<int> gone(c, 10); // send window #0, destroyed before its first use
    }
    MPI_Barrier(MPI_COMM_WORLD); // the withdrawal is on its way before rank 1 looks
    if (r.me == 1) {
        pmr::RecvWindow<int> orphan(c, 10); // receive window #0: its partner is gone
        auto m = message_of<pmr::UsageError>([&] { orphan.init(); });
        CHECK(m.find("destroyed its send window #0") != std::string::npos);
        CHECK(m.find("peer 0") != std::string::npos);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    // The connection goes on: the next pair (#1 on both sides) works.
    if (r.me == 0) {
        pmr::SendWindow<int> send(c, 10);
        send.init();
        for (int i = 0; i < 10; ++i) {
            send[static_cast<std::size_t>(i)] = 7 * i;
        }
        send.post();
        send.wait();
    } else {
        pmr::RecvWindow<int> recv(c, 10);
        recv.init();
        recv.post();
        recv.wait();
        for (int i = 0; i < 10; ++i) {
            CHECK(recv[static_cast<std::size_t>(i)] == 7 * i);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

TEST_CASE("a malformed set-up message that a withdrawal takes in is reported, not swallowed",
          "[errors]") {
    REQUIRE(short_timeout);
    Ranks r;
    pmr::Connection c(pmr::Target(MPI_COMM_WORLD, r.peer, 24, 24));
    c.establish();
    MPI_Barrier(MPI_COMM_WORLD);
    // Rank 0 breaks the tag rule: a message on the connection's set-up tag that is not pmr's.
    const char garbage[] = "not pmr";
    MPI_Request request = MPI_REQUEST_NULL;
    if (r.me == 0) {
        MPI_Isend(garbage, sizeof garbage, MPI_CHAR, 1, pmr::detail::bootstrap::max_user_tag() + 24,
                  MPI_COMM_WORLD, &request);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (r.me == 1) {
        {
            // Destroyed unused: its withdrawal takes in what rank 0 sent, where a destructor
            // cannot report it.
            const pmr::RecvWindow<int> gone(c, 10);
        }
        // The next set-up call reports it (without the report: Timeout, waiting for window #1;
        // caught too, so that the failing rank still joins the barriers below).
        pmr::RecvWindow<int> next(c, 10);
        std::string m;
        bool bootstrap_error = false;
        try {
            next.init();
        } catch (const pmr::BootstrapError& e) {
            bootstrap_error = true;
            m = e.what();
        } catch (const pmr::Error& e) {
            m = e.what();
        }
        INFO(m);
        CHECK(bootstrap_error);
        CHECK(m.find("is not a pmr set-up message") != std::string::npos);
        CHECK(m.find("from rank 0") != std::string::npos);
    }
    MPI_Wait(&request, MPI_STATUS_IGNORE);
    MPI_Barrier(MPI_COMM_WORLD);
}

TEST_CASE("a wait the peer never answers gives Timeout naming peer and window", "[errors]") {
    Ranks r;
    pmr::Connection c(pmr::Target(MPI_COMM_WORLD, r.peer, 23, 23));
    pmr::SendWindow<int> send(c, 10);
    pmr::RecvWindow<int> recv(c, 10);
    MPI_Barrier(MPI_COMM_WORLD);
    recv.init();
    send.init();
    if (r.me == 0) {
        recv.post(); // rank 1 never posts
        auto m = message_of<pmr::Timeout>([&] { recv.wait(); });
        CHECK(m.find("receive window #0") != std::string::npos);
        CHECK(m.find("PMR_TIMEOUT") != std::string::npos);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

TEST_CASE("a sender waits for a receiver that never calls init: Timeout", "[errors]") {
    Ranks r;
    pmr::Connection c(pmr::Target(MPI_COMM_WORLD, r.peer, 24, 24));
    // Above the sizes whose rounds may run ahead of the receiver's init (inline rounds, and small
    // windows on UCX's message path: rails/protocol.hpp).
    pmr::SendWindow<int> send(c, 20000);
    pmr::RecvWindow<int> recv(c, 20000);
    MPI_Barrier(MPI_COMM_WORLD);
    if (r.me == 0) {
        send.init();
        send.post();
        auto m = message_of<pmr::Timeout>([&] { send.wait(); });
        CHECK(m.find("has not called init()") != std::string::npos);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (r.me == 1) {
        recv.init(); // now the pending transfer may land: the sender's window still exists
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (r.me == 0) {
        send.wait(); // completes now
    } else {
        recv.post();
        recv.wait();
        CHECK(recv.received_count() == 20000);
    }
}

TEST_CASE("a wait's own timeout wins over PMR_TIMEOUT and names peer and window", "[errors]") {
    using namespace std::chrono_literals;
    Ranks r;
    pmr::Connection c(pmr::Target(MPI_COMM_WORLD, r.peer, 25, 25));
    // Large enough that a send cannot run ahead of the receiver's init (see above).
    pmr::SendWindow<int> send(c, 20000);
    pmr::RecvWindow<int> recv(c, 20000);
    c.establish();
    MPI_Barrier(MPI_COMM_WORLD);
    if (r.me == 0) { // rank 1 neither posts nor grants its buffer before the barrier below
        recv.init();
        recv.post();
        const auto start = std::chrono::steady_clock::now();
        auto m = message_of<pmr::Timeout>([&] { recv.wait(100ms); });
        CHECK(std::chrono::steady_clock::now() - start >= 100ms);
        // The wait's own 0.1 s, not PMR_TIMEOUT's 2 s.
        CHECK(m.find("the timeout given to wait() (0.1") != std::string::npos);
        CHECK(m.find("receive window #0") != std::string::npos);
        CHECK(m.find("-> peer 1") != std::string::npos);
        send.init();
        send.post();
        auto s = message_of<pmr::Timeout>([&] { send.wait(100ms); });
        CHECK(s.find("the timeout given to wait()") != std::string::npos);
        CHECK(s.find("send window #0") != std::string::npos);
        CHECK(s.find("has not called init()") != std::string::npos);
        // Several windows at once: wait_all's own limit, for both of its forms.
        const auto all_start = std::chrono::steady_clock::now();
        auto a = message_of<pmr::Timeout>([&] { pmr::wait_all(100ms, send, recv); });
        CHECK(std::chrono::steady_clock::now() - all_start >= 100ms);
        CHECK(a.find("2 of 2 windows incomplete after the timeout given to wait_all() (0.1") !=
              std::string::npos);
        CHECK(a.find("-> peer 1") != std::string::npos);
        auto b = message_of<pmr::Timeout>([&] { pmr::wait_all(&recv, &recv + 1, 50ms); });
        CHECK(b.find("1 of 1 windows incomplete after the timeout given to wait_all()") !=
              std::string::npos);
        CHECK(b.find("receive window #0") != std::string::npos);
        auto z = message_of<pmr::ArgumentError>([&] { pmr::wait_all(0ms, send, recv); });
        CHECK(z.find("wait_all() with a timeout of 0") != std::string::npos);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    // Both transfers are still in flight and complete once rank 1 catches up, within the limit.
    if (r.me == 1) {
        recv.init();
        send.init();
        send.post();
        recv.post();
    }
    pmr::wait_all(std::chrono::seconds(30), send, recv);
    CHECK(recv.received_count() == 20000);
    MPI_Barrier(MPI_COMM_WORLD);
}

TEST_CASE("a stuck set-up warns, naming both sides, then times out", "[errors]") {
    Ranks r;
    // Rank 1 gets the tags the wrong way round: its connection does not pair with rank 0's.
    pmr::Connection c(pmr::Target(MPI_COMM_WORLD, r.peer, 1, 0));
    MPI_Barrier(MPI_COMM_WORLD);
    if (r.me == 0) {
        std::string timeout;
        const std::string warning =
            stderr_of([&] { timeout = message_of<pmr::Timeout>([&] { c.establish(); }); });
        INFO(warning);
        CHECK(warning.find("pmr: warning: waited") != std::string::npos);
        CHECK(warning.find("rank 0 -> peer 1 (send tag 1, recv tag 0") != std::string::npos);
        // What the peer did create, as seen from here.
        CHECK(warning.find("connection #0 with send tag 1, recv tag 0") != std::string::npos);
        CHECK(warning.find("PMR_TIMEOUT") != std::string::npos);
        CHECK(timeout.find("did not create its side") != std::string::npos);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

// Registered on its own with PMR_SPIN_US=x: the first pmr object reports it, catchably.
TEST_CASE("malformed PMR_* variables are an ArgumentError of the first object", "[.][bad-env]") {
    Ranks r;
    auto message = message_of<pmr::ArgumentError>(
        [&] { pmr::Connection self(pmr::Target(MPI_COMM_WORLD, r.me, 0, 0)); });
    CHECK(message.find("PMR_SPIN_US='x'") != std::string::npos);
    CHECK_THROWS_AS(pmr::Target(MPI_COMM_WORLD, r.peer, 0, 0), pmr::ArgumentError);
}
