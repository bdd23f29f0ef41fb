// SPDX-License-Identifier: MIT
// Single-process tests of the public API: targets, communicators, memory, the window state machine
// and self connections. Runs on one rank.
#include "support.hpp"

#include "base/backoff.hpp"

#include <catch2/catch.hpp>

#include <pmr/pmr.hpp>

#include <cstring>
#include <numeric>
#include <string>
#include <unistd.h>
#include <vector>

using pmr_test::message_of;
using pmr_test::world_rank;

TEST_CASE("providers are named and listed", "[provider]") {
    CHECK(pmr::to_string(pmr::Provider::shm) == "shm");
    CHECK(pmr::provider_from_string("self") == pmr::Provider::self);
    CHECK_FALSE(pmr::provider_from_string("carrier-pigeon").has_value());
    CHECK(pmr::is_compiled(pmr::Provider::null));
    CHECK(pmr::is_compiled(pmr::Provider::self));
    CHECK(pmr::compiled_providers_string().find("self") != std::string::npos);
}

TEST_CASE("providers describe themselves", "[provider]") {
    CHECK_FALSE(pmr::traits(pmr::Provider::self).has_rails);
    CHECK(pmr::traits(pmr::Provider::shm).preference > 0);
    const pmr::ProviderTraits plain; // what a provider without hints (or not compiled) says
    CHECK(pmr::traits(pmr::Provider::shm).split_crossover_bytes == plain.split_crossover_bytes);
    if (pmr::is_compiled(pmr::Provider::ucx)) {
        CHECK(pmr::traits(pmr::Provider::ucx).has_rails);
        CHECK(pmr::traits(pmr::Provider::ucx).split_crossover_bytes == std::size_t{128} << 10);
        CHECK(pmr::traits(pmr::Provider::ucx).min_fragment_bytes == std::size_t{16} << 10);
    }
    if (pmr::is_compiled(pmr::Provider::tofu)) {
        CHECK(pmr::traits(pmr::Provider::tofu).preference == 0); // only when forced
        CHECK(pmr::traits(pmr::Provider::tofu).split_crossover_bytes == std::size_t{256} << 10);
    }
}

TEST_CASE("targets validate ranks and tags", "[target]") {
    const int me = world_rank();
    pmr::Target t(MPI_COMM_WORLD, me, 3, 4);
    CHECK(t.is_self());
    CHECK_FALSE(t.is_null());
    CHECK(t.send_tag() == 3);
    CHECK(t.recv_tag() == 4);
    CHECK(pmr::Target(MPI_COMM_WORLD, MPI_PROC_NULL, 0, 0).is_null());

    auto bad_rank =
        message_of<pmr::ArgumentError>([] { pmr::Target(MPI_COMM_WORLD, 1000000, 0, 0); });
    CHECK(bad_rank.find("1000000") != std::string::npos);
    CHECK_THROWS_AS(pmr::Target(MPI_COMM_WORLD, -5, 0, 0), pmr::ArgumentError);
    auto bad_tag = message_of<pmr::ArgumentError>([me] { pmr::Target(MPI_COMM_WORLD, me, -1, 0); });
    CHECK(bad_tag.find("tag -1") != std::string::npos);
    CHECK_THROWS_AS(pmr::Target(MPI_COMM_WORLD, me, 0, 2147483647), pmr::ArgumentError);
    CHECK_THROWS_AS(pmr::Target(MPI_COMM_NULL, 0, 0, 0), pmr::ArgumentError);
    CHECK_THROWS_AS(pmr::Connection(pmr::Target(MPI_COMM_WORLD, me, 0, 0), pmr::Provider::null),
                    pmr::ArgumentError);
}

TEST_CASE("communicator grids of one rank", "[communicator]") {
    pmr::Communicator world(MPI_COMM_WORLD);
    CHECK(world.dimensions() == 0);
    CHECK_THROWS_AS(world.neighbor(0, 1), pmr::UsageError);

    pmr::Communicator cart(MPI_COMM_WORLD, {1, 1}, {true, false});
    REQUIRE(cart.dimensions() == 2);
    CHECK(cart.size(0) == 1);
    CHECK(cart.periodic(0));
    CHECK_FALSE(cart.periodic(1));
    CHECK(cart.neighbor(0, 1) == cart.rank());
    CHECK(cart.neighbor(0, -1) == cart.rank());
    CHECK(cart.neighbor(1, 1) == MPI_PROC_NULL);
    CHECK(cart.target(1, -1).is_null());
    CHECK_THROWS_AS(cart.neighbor(2, 1), pmr::ArgumentError);
    CHECK_THROWS_AS(cart.neighbor(0, 0), pmr::ArgumentError);
    CHECK_THROWS_AS(pmr::Communicator(MPI_COMM_WORLD, {1, 1}, {true}), pmr::ArgumentError);
    CHECK_THROWS_AS(pmr::Communicator(MPI_COMM_WORLD, {2, 3}), pmr::ArgumentError);

    // Up pairs with down: the tags of opposite directions are swapped.
    auto up = cart.target(0, 1);
    auto down = cart.target(0, -1);
    CHECK(up.send_tag() == down.recv_tag());
    CHECK(up.recv_tag() == down.send_tag());

    pmr::Communicator moved(std::move(cart));
    CHECK(moved.dimensions() == 2);
}

TEST_CASE("pmr memory is shareable, aligned and recognised", "[memory]") {
    auto* p = pmr::allocate<double>(1000);
    REQUIRE(p != nullptr);
    CHECK(reinterpret_cast<std::uintptr_t>(p) % 4096 == 0);
    CHECK(p[999] == 0.0);
    CHECK(pmr::is_pmr_memory(p, 1000 * sizeof(double)));
    CHECK(pmr::is_pmr_memory(p + 10, 10 * sizeof(double)));
    CHECK_FALSE(pmr::is_pmr_memory(p, 5000 * sizeof(double)));
    std::vector<double> plain(10);
    CHECK_FALSE(pmr::is_pmr_memory(plain.data(), 10));
    pmr::deallocate(p);

    std::vector<int, pmr::Allocator<int>> v(12345, 7);
    CHECK(pmr::is_pmr_memory(v.data(), v.size() * sizeof(int)));
    CHECK(std::accumulate(v.begin(), v.end(), 0L) == 7L * 12345);
}

TEST_CASE("self connection with a == b pairs with itself", "[self]") {
    pmr::Connection c(pmr::Target(MPI_COMM_WORLD, world_rank(), 5, 5));
    CHECK(c.provider() == pmr::Provider::self);
    CHECK(c.rails() == 1);
    pmr::SendWindow<int> send(c, 100);
    pmr::RecvWindow<int> recv(c, 100);
    CHECK(send.owns_memory());
    for (int round = 0; round < 10; ++round) {
        std::iota(send.begin(), send.end(), round * 1000);
        recv.init();
        send.init();
        send.post();
        recv.post();
        send.wait();
        recv.wait();
        REQUIRE(recv.received_count() == 100);
        for (int i = 0; i < 100; ++i) {
            REQUIRE(recv[static_cast<std::size_t>(i)] == round * 1000 + i);
        }
    }
}

TEST_CASE("self connections with swapped tags pair with each other", "[self]") {
    const int me = world_rank();
    pmr::Connection up(pmr::Target(MPI_COMM_WORLD, me, 1, 0));
    pmr::Connection down(pmr::Target(MPI_COMM_WORLD, me, 0, 1));
    std::vector<double> a(64);
    std::vector<double> b(64);
    pmr::SendWindow<double> send_up(up, a.data(), a.size());
    pmr::RecvWindow<double> recv_down(down, b.data(), b.size());
    for (int round = 0; round < 5; ++round) {
        for (std::size_t i = 0; i < a.size(); ++i) {
            a[i] = round + 0.5 * static_cast<double>(i);
        }
        recv_down.init();
        send_up.init();
        send_up.post();
        recv_down.post();
        while (!send_up.test()) {
        }
        while (!recv_down.test()) {
        }
        REQUIRE(b == a);
    }
}

TEST_CASE("null connections complete at once and deliver nothing", "[null]") {
    pmr::Connection c(pmr::Target(MPI_COMM_WORLD, MPI_PROC_NULL, 0, 0));
    CHECK(c.provider() == pmr::Provider::null);
    std::vector<char> buffer(16, 'x');
    pmr::SendWindow<char> send(c, 16);
    pmr::RecvWindow<char> recv(c, buffer.data(), buffer.size());
    recv.init();
    send.init();
    send.post();
    recv.post();
    send.wait();
    recv.wait();
    CHECK(recv.received_bytes() == 0);
    CHECK(buffer == std::vector<char>(16, 'x'));
}

TEST_CASE("calls out of order throw UsageError and leave the window usable", "[state]") {
    pmr::Connection c(pmr::Target(MPI_COMM_WORLD, world_rank(), 9, 9));
    pmr::SendWindow<int> send(c, 4);
    pmr::RecvWindow<int> recv(c, 4);

    auto before_init = message_of<pmr::UsageError>([&] { send.post(); });
    CHECK(before_init.find("post() before init()") != std::string::npos);
    CHECK(before_init.find("send window #0") != std::string::npos);
    CHECK(before_init.find("peer") != std::string::npos);
    CHECK_THROWS_AS(send.wait(), pmr::UsageError);
    CHECK_THROWS_AS(recv.wait(), pmr::UsageError);
    CHECK_THROWS_AS(recv.test(), pmr::UsageError);
    CHECK_THROWS_AS(recv.received_bytes(), pmr::UsageError);

    recv.init();
    auto twice = message_of<pmr::UsageError>([&] { recv.init(); });
    CHECK(twice.find("init() called twice") != std::string::npos);
    CHECK_THROWS_AS(recv.wait(), pmr::UsageError); // wait before post
    send.init();
    send.post();
    CHECK_THROWS_AS(send.post(), pmr::UsageError);
    CHECK_THROWS_AS(send.init(), pmr::UsageError);
    recv.post();
    send.wait();
    recv.wait();
    CHECK(recv.received_bytes() == 16);
    CHECK_THROWS_AS(send.wait(), pmr::UsageError); // already completed
}

TEST_CASE("size checks", "[size]") {
    const int me = world_rank();
    SECTION("post larger than the window") {
        pmr::Connection c(pmr::Target(MPI_COMM_WORLD, me, 11, 11));
        pmr::SendWindow<int> send(c, 4);
        pmr::RecvWindow<int> recv(c, 8);
        recv.init();
        send.init();
        auto m = message_of<pmr::SizeError>([&] { send.post(17); });
        CHECK(m.find("17 B") != std::string::npos);
        send.post(16); // the window is still usable
        recv.post();
        send.wait();
        recv.wait();
        CHECK(recv.received_bytes() == 16);
    }
    SECTION("send window larger than the receive window fails on both sides") {
        pmr::Connection c(pmr::Target(MPI_COMM_WORLD, me, 12, 12));
        pmr::SendWindow<int> send(c, 8);
        pmr::RecvWindow<int> recv(c, 4);
        auto m = message_of<pmr::SizeError>([&] { recv.init(); });
        CHECK(m.find("larger than the peer's receive window") != std::string::npos);
        CHECK_THROWS_AS(send.init(), pmr::SizeError);
        CHECK_THROWS_AS(send.init(), pmr::SizeError); // the failure is final
    }
    SECTION("absurd counts and null buffers") {
        pmr::Connection c(pmr::Target(MPI_COMM_WORLD, me, 13, 13));
        CHECK_THROWS_AS(pmr::SendWindow<double>(c, static_cast<std::size_t>(-1) / 4),
                        pmr::SizeError);
        CHECK_THROWS_AS(pmr::SendWindow<double>(c, nullptr, 3), pmr::ArgumentError);
        pmr::SendWindow<double> empty_user(c, nullptr, 0); // legal: zero-size windows synchronise
        pmr::RecvWindow<double> empty_owned(c, 0);
        empty_owned.init();
        empty_user.init();
        empty_user.post();
        empty_owned.post();
        empty_user.wait();
        empty_owned.wait();
        CHECK(empty_owned.received_bytes() == 0);
    }
}

TEST_CASE("insert and extract", "[window]") {
    pmr::Connection c(pmr::Target(MPI_COMM_WORLD, world_rank(), 14, 14));
    pmr::SendWindow<int> send(c, 5);
    std::vector<int> in{1, 2, 3};
    send.insert(in.begin(), in.end(), 2);
    std::vector<int> out;
    send.extract(std::back_inserter(out));
    CHECK(out == std::vector<int>{0, 0, 1, 2, 3});
    CHECK_THROWS_AS(send.insert(in.begin(), in.end(), 3), pmr::SizeError);
}

TEST_CASE("moved windows and connections keep working", "[window]") {
    pmr::Connection original(pmr::Target(MPI_COMM_WORLD, world_rank(), 15, 15));
    pmr::Connection c(std::move(original));
    CHECK_THROWS_AS(original.establish(), pmr::UsageError); // NOLINT(bugprone-use-after-move)
    pmr::SendWindow<char> first(c, 3);
    pmr::RecvWindow<char> recv(c, 3);
    pmr::SendWindow<char> send(std::move(first));
    std::memcpy(send.data(), "abc", 3);
    recv.init();
    send.init();
    send.post();
    recv.post();
    send.wait();
    recv.wait();
    CHECK(std::string(recv.begin(), recv.end()) == "abc");
}

// Last in this file: it changes the process's spin policy for the waits that follow.
TEST_CASE("waits spin while the ranks fit the CPUs and yield at once beyond", "[unit][spin]") {
    auto& policy = pmr::detail::SpinPolicy::instance();
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    REQUIRE(cpus >= 1);
    policy.set_ranks_on_node(1);
    // A loaded machine must not make a fitting rank hand its core away (the launcher may have
    // counted more ranks than this test sees, so "fits" holds only if nothing said otherwise).
    if (!policy.oversubscribed()) {
        CHECK(policy.spin_only());
        CHECK(policy.budget_ns() > 0);
        policy.futile(); // a spin that found nothing does not switch to yielding
        pmr::detail::Backoff wait;
        for (int i = 0; i < 10000; ++i) {
            (void)wait.pause();
        }
        CHECK(policy.spin_only());
    }
    policy.set_ranks_on_node(static_cast<int>(cpus) + 1);
    CHECK(policy.oversubscribed());
    CHECK_FALSE(policy.spin_only());
    CHECK(policy.budget_ns() == 0);
    // A smaller count (a sub-communicator) does not undo what a larger one found.
    policy.set_ranks_on_node(1);
    CHECK(policy.oversubscribed());
    CHECK_FALSE(policy.spin_only());
}
