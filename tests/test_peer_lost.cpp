// SPDX-License-Identifier: MIT
// A peer that dies or leaves while we wait on it raises pmr::PeerLost within seconds instead of
// hanging: killed in the data path (default), killed during the set-up of a window (`setup`), or
// gone into MPI_Finalize with its windows alive (`finalize`). mpirun must be told to keep rank 0
// running (PMR_MPIEXEC_KEEP_GOING_FLAGS: Open MPI's --mca orte_abort_on_non_zero_status 0, MPICH's
// -disable-auto-cleanup); the verdict is printed. With --exit, the dying rank ends with _exit(1)
// instead of SIGKILL (MPICH ends all ranks when one dies by a signal). With --large the windows
// hold 1 MiB instead of 64 KiB (over UCX's TCP transport they take pmr's own TCP lanes).
#include <pmr/pmr.hpp>

#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <string>
#include <unistd.h>

namespace {

template <class F>
bool peer_lost_within(F&& wait, double limit_seconds, const char* what) {
    const auto start = std::chrono::steady_clock::now();
    try {
        wait();
    } catch (const pmr::PeerLost& e) {
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        std::printf("%s: PeerLost after %.2f s: %s\n", what, seconds, e.what());
        return seconds < limit_seconds;
    } catch (const std::exception& e) {
        std::printf("%s: FAILED: wrong exception: %s\n", what, e.what());
        return false;
    }
    std::printf("%s: FAILED: no exception\n", what);
    return false;
}

bool exit_instead_of_signal = false; // --exit: for launchers that end all ranks on a signal
std::size_t window_bytes = std::size_t{1} << 16; // --large: 1 MiB

[[noreturn]] void die() {
    if (exit_instead_of_signal) {
        _exit(1);
    }
    raise(SIGKILL);
    _exit(1);
}

// Send rounds to a peer that is gone. A round that needs the peer's init ends in PeerLost; rounds
// of a small window may run ahead of the peer's init (inline rounds, and windows up to 64 KiB on
// UCX's message path: rails/protocol.hpp) and complete like eager MPI sends, at most 15 of them:
// the next needs the peer's init again.
void send_rounds(pmr::SendWindow<char>& send) {
    for (int round = 0; round < 17; ++round) {
        send.init();
        send.post();
        send.wait();
    }
}

// The peer dies after one round; the next send rounds and receive round end in PeerLost.
bool killed_during_data_path(int rank, pmr::Connection& c) {
    pmr::SendWindow<char> send(c, window_bytes);
    pmr::RecvWindow<char> recv(c, window_bytes);
    recv.init();
    send.init();
    send.post();
    recv.post();
    send.wait();
    recv.wait();
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1) {
        die();
    }
    bool ok = true;
    ok &= peer_lost_within([&] { send_rounds(send); }, 5.0, "send round");
    ok &= peer_lost_within(
        [&] {
            recv.init();
            recv.post();
            recv.wait();
        },
        5.0, "recv round");
    return ok;
}

// The peer dies after the connection's handshake, before it creates its windows: the first use of
// this side's window waits for a description that never comes, and must end in PeerLost.
bool killed_during_setup(int rank, pmr::Connection& c) {
    c.establish();
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1) {
        die();
    }
    pmr::RecvWindow<char> recv(c, 100);
    return peer_lost_within([&] { recv.init(); }, 5.0, "recv.init (set-up)");
}

// The peer calls MPI_Finalize with its windows alive, and waits there for this rank: the next
// round's waits must end in PeerLost, not in a hang.
bool finalized_with_live_windows(int rank, pmr::Connection& c) {
    pmr::SendWindow<char> send(c, window_bytes);
    pmr::RecvWindow<char> recv(c, window_bytes);
    recv.init();
    send.init();
    send.post();
    recv.post();
    send.wait();
    recv.wait();
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1) {
        MPI_Finalize(); // with `send` and `recv` alive
        std::printf("rank 1 finalized\n");
        std::fflush(stdout);
        _exit(0);
    }
    // Any call of the round may be the first to notice (post() does when the peer has already
    // revoked its credit), so each whole round must end in PeerLost.
    bool ok = true;
    ok &= peer_lost_within([&] { send_rounds(send); }, 15.0, "send round (peer finalized)");
    ok &= peer_lost_within(
        [&] {
            recv.init();
            recv.post();
            recv.wait();
        },
        15.0, "recv round (peer finalized)");
    return ok;
}

} // namespace

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const int peer = 1 - rank;
    std::string mode = "data";
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--exit") == 0) {
            exit_instead_of_signal = true;
        } else if (std::strcmp(argv[i], "--large") == 0) {
            window_bytes = std::size_t{1} << 20;
        } else {
            mode = argv[i];
        }
    }
    pmr::Connection c(pmr::Target(MPI_COMM_WORLD, peer, 0, 0));
    bool ok = false;
    if (mode == "setup") {
        ok = killed_during_setup(rank, c);
    } else if (mode == "finalize") {
        ok = finalized_with_live_windows(rank, c);
    } else {
        ok = killed_during_data_path(rank, c);
    }
    // The verdict is the last line printed, once nothing is left to tear down: CTest judges these
    // runs by it (mpirun fails because of the dead rank), so a failure in the teardown must come
    // before it.
    if (mode == "finalize") {
        MPI_Finalize(); // the peer waits for this rank in its MPI_Finalize
    }
    std::printf(ok ? "peer-lost test passed\n" : "peer-lost test FAILED\n");
    std::fflush(stdout);
    _exit(ok ? 0 : 1); // MPI_Finalize could wait for the dead rank
}
