// SPDX-License-Identifier: MIT
// The API around the windows: waiting on many windows at once, empty connections and windows in
// arrays, library connections that keep out of the application's pairing, element types checked
// across ranks, a Communicator that goes out of scope before its connections are used, and which
// providers a run on one node touches.
#include "support.hpp"

#include "base/library_target.hpp"

#include <pmr/config.hpp>

#if PMR_WITH_UCX
#include "providers/ucx/process.hpp"
#endif

#include <array>
#include <optional>
#include <vector>

using namespace pmr_test;

namespace {

/// The ring neighbours of this rank.
int next_rank() {
    return (world_rank() + 1) % world_size();
}
int previous_rank() {
    return (world_rank() + world_size() - 1) % world_size();
}

} // namespace

TEST_CASE("wait_all and test_all complete windows of both sides and any element type", "[api]") {
    start_together();
    pmr::Connection up(pmr::Target(MPI_COMM_WORLD, next_rank(), 1, 2));
    pmr::Connection down(pmr::Target(MPI_COMM_WORLD, previous_rank(), 2, 1));
    pmr::SendWindow<double> send_up(up, 100);
    pmr::SendWindow<int> send_down(down, 7);
    pmr::RecvWindow<double> recv_down(down, 100);
    pmr::RecvWindow<int> recv_up(up, 7);
    for (int round = 1; round <= 20; ++round) {
        for (std::size_t i = 0; i < send_up.size(); ++i) {
            send_up[i] = world_rank() * 1000.0 + round + static_cast<double>(i);
        }
        for (std::size_t i = 0; i < send_down.size(); ++i) {
            send_down[i] = world_rank() * 100 + round * 10 + static_cast<int>(i);
        }
        recv_down.init();
        recv_up.init();
        send_up.init();
        send_down.init();
        send_up.post();
        send_down.post();
        recv_down.post();
        recv_up.post();
        if (round % 2 == 0) {
            pmr::wait_all(send_up, send_down, recv_down, recv_up);
        } else {
            while (!pmr::test_all(send_up, send_down, recv_down, recv_up)) {
            }
        }
        // Every window is back in its initial state: the next round starts with init().
        for (std::size_t i = 0; i < recv_down.size(); ++i) {
            REQUIRE(recv_down[i] == previous_rank() * 1000.0 + round + static_cast<double>(i));
        }
        for (std::size_t i = 0; i < recv_up.size(); ++i) {
            REQUIRE(recv_up[i] == next_rank() * 100 + round * 10 + static_cast<int>(i));
        }
    }
    // Not posted: a usage error that names the call.
    auto idle = message_of<pmr::UsageError>([&] { pmr::wait_all(send_up, recv_up); });
    CHECK(idle.find("wait()") != std::string::npos);
    CHECK_THROWS_AS(pmr::test_all(recv_up), pmr::UsageError);
}

TEST_CASE("test_all leaves every window posted until all have completed", "[api]") {
    start_together();
    pmr::Connection to_self_a(pmr::Target(MPI_COMM_WORLD, world_rank(), 3, 4));
    pmr::Connection to_self_b(pmr::Target(MPI_COMM_WORLD, world_rank(), 4, 3));
    pmr::SendWindow<char> send(to_self_a, 10);
    pmr::RecvWindow<char> recv(to_self_b, 10);
    pmr::SendWindow<char> late_send(to_self_b, 10);
    pmr::RecvWindow<char> late_recv(to_self_a, 10);
    recv.init();
    late_recv.init();
    send.init();
    send.post();
    recv.post();
    late_recv.post();
    // late_send has not posted: the group is incomplete, and nothing of it completes alone.
    CHECK_FALSE(pmr::test_all(send, recv, late_recv));
    CHECK_FALSE(pmr::test_all(send, recv, late_recv));
    late_send.init();
    late_send.post();
    while (!pmr::test_all(send, recv, late_recv, late_send)) {
    }
    // All idle again.
    CHECK_NOTHROW(recv.init());
    CHECK_NOTHROW(late_recv.init());
}

TEST_CASE("wait_all over a vector of windows", "[api]") {
    start_together();
    std::vector<pmr::Connection> connections(4); // empty, assigned below: no std::optional
    for (int k = 0; k < 4; ++k) {
        connections[static_cast<std::size_t>(k)] = pmr::Connection(pmr::Target(
            MPI_COMM_WORLD, k % 2 == 0 ? next_rank() : previous_rank(), 10 + k, 10 + (k ^ 1)));
    }
    std::vector<pmr::SendWindow<std::uint32_t>> sends(4);
    std::vector<pmr::RecvWindow<std::uint32_t>> recvs(4);
    for (std::size_t k = 0; k < 4; ++k) {
        sends[k] = pmr::SendWindow<std::uint32_t>(connections[k], 64);
        recvs[k] = pmr::RecvWindow<std::uint32_t>(connections[k], 64);
    }
    for (std::uint32_t round = 1; round <= 5; ++round) {
        for (std::size_t k = 0; k < 4; ++k) {
            std::fill(sends[k].begin(), sends[k].end(),
                      round * 100 + static_cast<std::uint32_t>(world_rank()) * 10 +
                          static_cast<std::uint32_t>(k));
            recvs[k].init();
        }
        for (auto& s : sends) {
            s.init();
            s.post();
        }
        for (auto& r : recvs) {
            r.post();
        }
        pmr::wait_all(sends.begin(), sends.end());
        pmr::wait_all(recvs.begin(), recvs.end());
        for (std::size_t k = 0; k < 4; ++k) {
            // Connection k to next (k even) pairs with the neighbour's connection k ^ 1.
            const int from = k % 2 == 0 ? next_rank() : previous_rank();
            REQUIRE(recvs[k][0] == round * 100 + static_cast<std::uint32_t>(from) * 10 +
                                       static_cast<std::uint32_t>(k ^ 1));
        }
    }
}

TEST_CASE("empty connections and windows refuse every use", "[api]") {
    pmr::Connection empty;
    CHECK_FALSE(empty);
    CHECK_THROWS_AS(empty.target(), pmr::UsageError);
    CHECK_THROWS_AS(empty.peer(), pmr::UsageError);
    CHECK_THROWS_AS(empty.establish(), pmr::UsageError);
    CHECK_THROWS_AS(pmr::SendWindow<int>(empty, 4), pmr::UsageError);
    pmr::Connection moved(pmr::Target(MPI_COMM_WORLD, MPI_PROC_NULL, 0, 0));
    pmr::Connection into(std::move(moved));
    CHECK(into);
    CHECK_THROWS_AS(moved.target(), pmr::UsageError); // NOLINT(bugprone-use-after-move)
    pmr::RecvWindow<int> window;
    CHECK_FALSE(window);
    CHECK_THROWS_AS(window.init(), pmr::UsageError);
    window = pmr::RecvWindow<int>(into, 4);
    CHECK(window);
    window.init();
    window.post();
    window.wait();
    CHECK(window.received_bytes() == 0); // MPI_PROC_NULL delivers nothing
}

TEST_CASE("library connections do not shift the application's pairing", "[api]") {
    start_together();
    pmr::Communicator world(MPI_COMM_WORLD);
    // Rank 0 makes a library connection (as a collective would) before its own; the others do
    // not. The application's windows still pair with each other, in creation order.
    std::optional<pmr::Connection> internal;
    if (world_rank() == 0) {
        internal.emplace(pmr::detail::library_target(world, next_rank(), 1, 2));
        CHECK(pmr::detail::TargetAccess::is_library(internal->target()));
        CHECK(internal->describe().find("pmr-internal") != std::string::npos);
    }
    pmr::Connection up(pmr::Target(world, next_rank(), 1, 2));
    pmr::Connection down(pmr::Target(world, previous_rank(), 2, 1));
    pmr::SendWindow<int> send(up, 1);
    pmr::RecvWindow<int> recv(down, 1);
    send[0] = world_rank();
    recv.init();
    send.init();
    send.post();
    recv.post();
    pmr::wait_all(send, recv);
    CHECK(recv[0] == previous_rank());
}

TEST_CASE("element types of paired windows are checked", "[api]") {
    start_together();
    if (world_size() < 2) {
        return;
    }
    pmr::Connection up(pmr::Target(MPI_COMM_WORLD, next_rank(), 20, 21));
    pmr::Connection down(pmr::Target(MPI_COMM_WORLD, previous_rank(), 21, 20));
    // float[4] into double[2]: the same bytes, other elements.
    pmr::SendWindow<float> send(up, 4);
    pmr::RecvWindow<double> recv(down, 2);
    auto message = message_of<pmr::ArgumentError>([&] { send.init(); });
    CHECK(message.find("elements of 8 B, this one of 4 B") != std::string::npos);
    CHECK_THROWS_AS(recv.init(), pmr::ArgumentError);
    // Byte windows pair with anything.
    pmr::SendWindow<std::byte> bytes(up, 8);
    pmr::RecvWindow<double> doubles(down, 1);
    doubles.init();
    bytes.init();
    bytes.post();
    doubles.post();
    pmr::wait_all(bytes, doubles);
    CHECK(doubles.received_bytes() == 8);
}

TEST_CASE("a Communicator may go out of scope before its connections are used", "[api]") {
    start_together();
    std::vector<pmr::Connection> connections;
    {
        pmr::Communicator cart(MPI_COMM_WORLD, {0}, {true});
        connections.emplace_back(cart.target(0, +1));
        connections.emplace_back(cart.target(0, -1));
    } // the Cartesian communicator stays alive for the connections
    pmr::SendWindow<int> send(connections[0], 1);
    pmr::RecvWindow<int> recv(connections[1], 1);
    send[0] = world_rank() + 1;
    recv.init();
    send.init();
    send.post();
    recv.post();
    pmr::wait_all(send, recv);
    CHECK(recv[0] == previous_rank() + 1);
}

TEST_CASE("Communicator coordinates and the virtual torus's refusals", "[api]") {
    start_together();
    const int size = world_size();
    const int rank = world_rank();
    // A 2D grid of size x 1 (no reordering): the coordinate in dimension 0 is the rank.
    pmr::Communicator cart(MPI_COMM_WORLD, {size, 1}, {true, false});
    CHECK(cart.coordinate(0) == rank);
    CHECK(cart.coordinate(1) == 0);
    CHECK(cart.coordinates() == std::vector<int>{rank, 0});
    CHECK_THROWS_AS(cart.coordinate(2), pmr::ArgumentError);
    CHECK_THROWS_AS(cart.coordinate(-1), pmr::ArgumentError);
    // Without a grid there is no coordinate.
    pmr::Communicator plain(MPI_COMM_WORLD);
    CHECK_THROWS_AS(plain.coordinate(0), pmr::UsageError);

    // Extents below 1, and a grid that does not hold the ranks, on every rank alike; with or
    // without the tofu provider compiled in.
    const auto zero = message_of<pmr::ArgumentError>([&] {
        (void)pmr::tofu::virtual_torus(MPI_COMM_WORLD, {size, 0, 1});
    });
    CHECK(zero.find("extents of at least 1") != std::string::npos);
    CHECK_THROWS_AS(pmr::tofu::virtual_torus(MPI_COMM_WORLD, {size, 1, -2}), pmr::ArgumentError);
    CHECK_THROWS_AS(pmr::tofu::virtual_torus(MPI_COMM_WORLD, {size, 2, 1}), pmr::ArgumentError);
    // The deprecated member spelling, kept for one release, is the same function.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    const auto old_spelling = message_of<pmr::ArgumentError>([&] {
        (void)pmr::Communicator::virtual_torus(MPI_COMM_WORLD, {size, 0, 1});
    });
#pragma GCC diagnostic pop
    CHECK(old_spelling == zero);
}

// Hidden, run in a process of its own: pmr's hello stays unreceived on the freed communicator, and
// Open MPI can stall a later MPI_Comm_dup on such stale traffic.
TEST_CASE("a freed raw communicator is a usage error, not a crash", "[.][freed]") {
    start_together();
    MPI_Comm dup = MPI_COMM_NULL;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    pmr::Connection c(pmr::Target(dup, next_rank(), 30, 31));
    MPI_Comm_free(&dup);
    auto message = message_of<pmr::UsageError>([&] { c.establish(); });
    CHECK(message.find("was freed") != std::string::npos);
}

TEST_CASE("one node and no provider forced: nothing but shared memory is started", "[api][ucx]") {
    start_together();
    if (environment("PMR_PROVIDER")) {
        return;
    }
    pmr::Communicator world(MPI_COMM_WORLD);
    std::vector<pmr::Connection> connections;
    std::vector<pmr::SendWindow<double>> sends;
    std::vector<pmr::RecvWindow<double>> recvs;
    connections.reserve(static_cast<std::size_t>(world_size()));
    for (int peer = 0; peer < world_size(); ++peer) {
        connections.emplace_back(pmr::Target(world, peer, 40, 40));
    }
    for (auto& c : connections) {
        sends.emplace_back(c, 1000);
        recvs.emplace_back(c, 1000);
    }
    for (auto& r : recvs) {
        r.init();
    }
    for (auto& s : sends) {
        s.init();
        s.post();
    }
    for (auto& r : recvs) {
        r.post();
    }
    pmr::wait_all(sends.begin(), sends.end());
    pmr::wait_all(recvs.begin(), recvs.end());
    for (std::size_t peer = 0; peer < connections.size(); ++peer) {
        CHECK(connections[peer].provider() ==
              (static_cast<int>(peer) == world_rank() ? pmr::Provider::self : pmr::Provider::shm));
    }
#if PMR_WITH_UCX
    CHECK(pmr::detail::ucx::UcxProcess::existing() == nullptr);
#endif
}
