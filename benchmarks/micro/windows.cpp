// SPDX-License-Identifier: MIT
// Costs of one transfer round, of test(), and of setting windows up, on connections that need no
// second process: to the own rank (self provider, one memcpy) and to MPI_PROC_NULL (null provider,
// nothing to move: the pure cost of the calls). MPI persistent requests on the same peers are the
// yardstick.
#include <benchmark/benchmark.h>

#include <pmr/pmr.hpp>

#include <mpi.h>

#include <vector>

namespace {

int own_rank() {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return rank;
}

/// Self target with equal tags: the connection pairs with itself, so its k-th send window pairs
/// with its own k-th receive window.
pmr::Target peer_target(bool null) {
    return {MPI_COMM_WORLD, null ? MPI_PROC_NULL : own_rank(), 0, 0};
}

/// The round of a halo exchange, as applications write it.
template <class Send, class Recv>
void round(Send& send, Recv& recv) {
    recv.init();
    send.init();
    send.post();
    recv.post();
    send.wait();
    recv.wait();
}

void sizes(benchmark::internal::Benchmark* b) {
    b->Arg(0)->Arg(8)->Arg(64)->Arg(512)->Arg(4 << 10)->Arg(32 << 10)->Arg(256 << 10)->Arg(2 << 20);
}

/// init + post + wait on both windows, library-owned memory.
void BM_Round(benchmark::State& state, bool null) {
    const auto bytes = static_cast<std::size_t>(state.range(0));
    pmr::Connection connection(peer_target(null));
    pmr::SendWindow<char> send(connection, bytes);
    pmr::RecvWindow<char> recv(connection, bytes);
    round(send, recv); // completes the set-up outside the timed loop
    for (auto _ : state) {
        round(send, recv);
    }
    state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * state.range(0));
}
BENCHMARK_CAPTURE(BM_Round, self, false)->Apply(sizes);
BENCHMARK_CAPTURE(BM_Round, null, true)->Arg(0)->Arg(4 << 10);

/// The same round with test() polled instead of wait().
void BM_RoundWithTest(benchmark::State& state, bool null) {
    const auto bytes = static_cast<std::size_t>(state.range(0));
    pmr::Connection connection(peer_target(null));
    pmr::SendWindow<char> send(connection, bytes);
    pmr::RecvWindow<char> recv(connection, bytes);
    round(send, recv);
    for (auto _ : state) {
        recv.init();
        send.init();
        send.post();
        recv.post();
        while (!send.test()) {
        }
        while (!recv.test()) {
        }
    }
    state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * state.range(0));
}
BENCHMARK_CAPTURE(BM_RoundWithTest, self, false)->Arg(8)->Arg(4 << 10);
BENCHMARK_CAPTURE(BM_RoundWithTest, null, true)->Arg(8);

/// test() on a receive whose data has not been sent: the cost of one unsuccessful poll, which is
/// what an application pays per check while overlapping computation.
void BM_TestPending(benchmark::State& state) {
    pmr::Connection connection(peer_target(false));
    pmr::SendWindow<char> send(connection, 64);
    pmr::RecvWindow<char> recv(connection, 64);
    round(send, recv);
    recv.init();
    recv.post();
    for (auto _ : state) {
        benchmark::DoNotOptimize(recv.test());
    }
    send.init();
    send.post();
    send.wait();
    recv.wait();
}
BENCHMARK(BM_TestPending);

/// Window construction and the first round, which completes the window's set-up, per size; the
/// connection exists already. Library-owned memory or a user buffer.
void BM_WindowSetup(benchmark::State& state, bool owned) {
    const auto bytes = static_cast<std::size_t>(state.range(0));
    pmr::Connection connection(peer_target(false));
    std::vector<char> send_buffer(owned ? 0 : bytes);
    std::vector<char> recv_buffer(owned ? 0 : bytes);
    for (auto _ : state) {
        if (owned) {
            pmr::SendWindow<char> send(connection, bytes);
            pmr::RecvWindow<char> recv(connection, bytes);
            round(send, recv);
        } else {
            pmr::SendWindow<char> send(connection, send_buffer.data(), bytes);
            pmr::RecvWindow<char> recv(connection, recv_buffer.data(), bytes);
            round(send, recv);
        }
    }
}
BENCHMARK_CAPTURE(BM_WindowSetup, owned, true)->Arg(8)->Arg(4 << 10)->Arg(256 << 10)->Arg(4 << 20);
BENCHMARK_CAPTURE(BM_WindowSetup, user, false)->Arg(8)->Arg(4 << 10)->Arg(256 << 10)->Arg(4 << 20);

/// A connection to the own rank, established (handshake through the MPI mailbox).
void BM_ConnectionSetup(benchmark::State& state, bool null) {
    for (auto _ : state) {
        pmr::Connection connection(peer_target(null));
        connection.establish();
    }
}
BENCHMARK_CAPTURE(BM_ConnectionSetup, self, false);
BENCHMARK_CAPTURE(BM_ConnectionSetup, null, true);

/// Yardstick: MPI persistent receive and send to the own rank or MPI_PROC_NULL, Startall +
/// Waitall.
void BM_MpiPersistentRound(benchmark::State& state, bool null) {
    const auto bytes = static_cast<int>(state.range(0));
    std::vector<char> send(static_cast<std::size_t>(bytes));
    std::vector<char> recv(static_cast<std::size_t>(bytes));
    const int peer = null ? MPI_PROC_NULL : own_rank();
    MPI_Request requests[2];
    MPI_Recv_init(recv.data(), bytes, MPI_BYTE, peer, 0, MPI_COMM_WORLD, &requests[0]);
    MPI_Send_init(send.data(), bytes, MPI_BYTE, peer, 0, MPI_COMM_WORLD, &requests[1]);
    for (auto _ : state) {
        MPI_Startall(2, requests);
        MPI_Waitall(2, requests, MPI_STATUSES_IGNORE);
    }
    MPI_Request_free(&requests[0]);
    MPI_Request_free(&requests[1]);
    state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * state.range(0));
}
BENCHMARK_CAPTURE(BM_MpiPersistentRound, self, false)->Apply(sizes);
BENCHMARK_CAPTURE(BM_MpiPersistentRound, null, true)->Arg(0)->Arg(4 << 10);

} // namespace
