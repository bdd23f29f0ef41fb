// SPDX-License-Identifier: MIT
// A peer that dies while we wait on it raises pmr::PeerLost within seconds instead of hanging.
// Rank 1 kills itself after one round; rank 0 then waits on both of its windows. mpirun must be
// told to keep rank 0 running (--mca orte_abort_on_non_zero_status 0); the verdict is printed.
#include <pmr/pmr.hpp>

#include <chrono>
#include <csignal>
#include <cstdio>
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

} // namespace

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const int peer = 1 - rank;
    pmr::Connection c(pmr::Target(MPI_COMM_WORLD, peer, 0, 0));
    pmr::SendWindow<char> send(c, 1 << 16); // larger than inline: a send needs the peer's init
    pmr::RecvWindow<char> recv(c, 1 << 16);
    recv.init();
    send.init();
    send.post();
    recv.post();
    send.wait();
    recv.wait();
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 1) {
        raise(SIGKILL);
    }
    bool ok = true;
    recv.init();
    send.init();
    send.post();
    ok &= peer_lost_within([&] { send.wait(); }, 5.0, "send.wait");
    recv.post();
    ok &= peer_lost_within([&] { recv.wait(); }, 5.0, "recv.wait");
    std::printf(ok ? "peer-lost test passed\n" : "peer-lost test FAILED\n");
    std::fflush(stdout);
    _exit(ok ? 0 : 1); // MPI_Finalize could wait for the dead rank
}
