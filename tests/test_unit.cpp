// SPDX-License-Identifier: MIT
// Single-process tests of the public API: targets, communicators, memory, the window state machine
// and self connections. Runs on one rank.
#include "support.hpp"

#include "base/backoff.hpp"

#include <catch2/catch.hpp>

#include <pmr/pmr.hpp>

#include <algorithm>
#include <chrono>
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
        auto m = message_of<pmr::SizeError>([&] { send.post(pmr::Elements{5}); });
        CHECK(m.find("post of 5 elements exceeds this window (4 elements of 4 B)") !=
              std::string::npos);
        send.post(pmr::Elements{4}); // the window is still usable
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

TEST_CASE("typed windows count elements in partial and multi-rail posts", "[size][window]") {
    // An element of 24 bytes, so that a count read as bytes would move a different amount.
    struct Point {
        double x, y, z;
    };
    static_assert(sizeof(Point) == 24);
    pmr::Connection c(pmr::Target(MPI_COMM_WORLD, world_rank(), 40, 40));
    pmr::SendWindow<Point> send(c, 6);
    pmr::RecvWindow<Point> recv(c, 8);
    for (std::size_t i = 0; i < send.size(); ++i) {
        send[i] = Point{double(i), -double(i), 0.5};
    }
    auto round = [&](auto&& post) {
        std::fill(recv.begin(), recv.end(), Point{-1, -1, -1});
        recv.init();
        send.init();
        post();
        recv.post();
        pmr::wait_all(send, recv);
    };
    auto untouched_from = [&](std::size_t first) {
        return std::all_of(recv.begin() + first, recv.end(),
                           [](const Point& p) { return p.x == -1 && p.y == -1 && p.z == -1; });
    };
    SECTION("post(Elements{n}) moves exactly n * sizeof(T) bytes") {
        round([&] { send.post(pmr::Elements{3}); });
        CHECK(recv.received_bytes() == 3 * sizeof(Point));
        CHECK(recv.received_count() == 3);
        CHECK(recv[2].x == 2.0);
        CHECK(recv[2].y == -2.0);
        CHECK(untouched_from(3));
        round([&] { send.post(pmr::Elements{0}); });
        CHECK(recv.received_bytes() == 0);
        CHECK(untouched_from(0));
    }
    SECTION("rail slices count elements too") {
        round([&] { send.post({pmr::RailSlice{0, 1, 0}, pmr::RailSlice{1, 4, 0}}); });
        CHECK(recv.received_bytes() == 5 * sizeof(Point));
        CHECK(recv[4].x == 4.0);
        CHECK(untouched_from(5));
    }
    SECTION("counts beyond the window raise SizeError in elements") {
        CHECK_THROWS_AS(send.post(pmr::Elements{7}), pmr::UsageError); // before init(), as post()
        recv.init();
        send.init();
        auto m = message_of<pmr::SizeError>([&] { send.post(pmr::Elements{7}); });
        CHECK(m.find("post of 7 elements exceeds this window (6 elements of 24 B)") !=
              std::string::npos);
        CHECK(m.find("send window #0") != std::string::npos);
        // A count whose byte size wraps around must not pass as a small post.
        const std::size_t wraps = static_cast<std::size_t>(-1) / sizeof(Point) + 2;
        CHECK_THROWS_AS(send.post(pmr::Elements{wraps}), pmr::SizeError);
        auto s = message_of<pmr::SizeError>([&] {
            send.post({pmr::RailSlice{0, 4, 0}, pmr::RailSlice{4, 3, 0}});
        });
        CHECK(s.find("post of 7 elements") != std::string::npos);
        CHECK_THROWS_AS(send.post({pmr::RailSlice{0, 2, 0}, pmr::RailSlice{2, wraps, 0}}),
                        pmr::SizeError);
        send.post(pmr::Elements{6}); // the refusals left the round open
        recv.post();
        pmr::wait_all(send, recv);
        CHECK(recv.received_count() == 6);
    }
    SECTION("the deprecated byte spellings still count bytes") {
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#endif
        round([&] { send.post(std::size_t{2 * sizeof(Point)}); });
        CHECK(recv.received_count() == 2);
        round([&] { send.post({pmr::RailRange{0, sizeof(Point), 0}}); });
        CHECK(recv.received_count() == 1);
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
    }
}

TEST_CASE("a wait with its own timeout raises Timeout promptly, naming window and peer",
          "[timeout][window]") {
    using namespace std::chrono_literals;
    pmr::Connection c(pmr::Target(MPI_COMM_WORLD, world_rank(), 41, 41));
    pmr::SendWindow<int> send(c, 4);
    pmr::RecvWindow<int> recv(c, 4);
    CHECK_FALSE(c.established());
    recv.init(); // the first use completes the handshake
    CHECK(c.established());
    CHECK(c.chosen_provider() == pmr::Provider::self);
    recv.post();
    // The sender never posts: PMR_TIMEOUT (unset: forever) would not end this wait soon.
    const auto start = std::chrono::steady_clock::now();
    auto m = message_of<pmr::Timeout>([&] { recv.wait(50ms); });
    const auto took = std::chrono::steady_clock::now() - start;
    CHECK(took >= 50ms);
    CHECK(took < 20s); // a loaded machine may be slow, but nowhere near PMR_TIMEOUT
    CHECK(m.find("no completion within the timeout given to wait() (0.05") != std::string::npos);
    CHECK(m.find("receive window #0") != std::string::npos);
    CHECK(m.find("-> peer " + std::to_string(world_rank())) != std::string::npos);
    CHECK_THROWS_AS(recv.wait(0s), pmr::ArgumentError);
    CHECK_THROWS_AS(recv.wait(-1ms), pmr::ArgumentError);
    // The transfer is still in flight: a later wait completes it.
    send.init();
    send[0] = 7;
    send.post();
    send.wait(std::chrono::duration<double>(60));
    recv.wait(1min);
    CHECK(recv[0] == 7);
}

TEST_CASE("a connection's provider is known without blocking where the peer's node is",
          "[connection]") {
    pmr::Connection c(pmr::Target(MPI_COMM_WORLD, world_rank(), 42, 42));
    CHECK_FALSE(c.established());
    CHECK(c.chosen_provider() == pmr::Provider::self); // decided in the constructor
    CHECK_FALSE(c.established());                      // and still no handshake
    CHECK(c.provider() == pmr::Provider::self);        // completes it
    CHECK(c.established());
    const pmr::Connection empty;
    CHECK_THROWS_AS(empty.established(), pmr::UsageError);
    CHECK_THROWS_AS(empty.chosen_provider(), pmr::UsageError);
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

// The copy that avoids rep movsb's false overlap (pmr's staging copies, pmr-run's slots): the
// same bytes as memcpy at every distance between destination and source, the 1-15 bytes modulo
// 4 KiB that it copies in pieces included, and nothing written outside the destination.
TEST_CASE("pmr::copy_bytes copies exactly at every distance", "[unit][copy]") {
    constexpr std::size_t guard = 64;
    constexpr auto fill = std::byte{0xEE};
    std::vector<std::byte> source(std::size_t{3} << 16);
    for (std::size_t i = 0; i < source.size(); ++i) {
        source[i] = static_cast<std::byte>(i * 7 + 3);
    }
    std::vector<std::byte> target(source.size() + std::size_t{2} * 4096 + 2 * guard);
    for (const std::size_t bytes : {0UL, 1UL, 2047UL, 2048UL, 2049UL, 4099UL, 65536UL, 70001UL}) {
        for (std::size_t distance = 0; distance < 20; ++distance) {
            std::fill(target.begin(), target.end(), fill);
            // Destination `distance` bytes after the source modulo 4 KiB.
            const auto src_page = reinterpret_cast<std::uintptr_t>(source.data()) & 4095U;
            const auto base = reinterpret_cast<std::uintptr_t>(target.data()) + guard;
            const std::size_t shift = (src_page + distance - (base & 4095U)) & 4095U;
            std::byte* to = target.data() + guard + shift;
            REQUIRE(((reinterpret_cast<std::uintptr_t>(to) -
                      reinterpret_cast<std::uintptr_t>(source.data())) &
                     4095U) == distance);
            pmr::copy_bytes(to, source.data(), bytes);
            INFO(bytes << " bytes, distance " << distance);
            CHECK(std::equal(to, to + bytes, source.begin()));
            CHECK(std::all_of(target.data(), to, [&](std::byte c) { return c == fill; }));
            CHECK(std::all_of(to + bytes, target.data() + target.size(),
                              [&](std::byte c) { return c == fill; }));
        }
    }
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
