// SPDX-License-Identifier: MIT
// The emulated Tofu layer of the tofu provider (src/providers/tofu/emulated/) on its own: two
// emulated nodes in one process, registered memory, puts and gets with local completion and
// remote notices, the published limits, full queues, ordering, and the timing model's arithmetic.
#include "support.hpp"

#include "providers/tofu/emulated/model.hpp"
#include "providers/tofu/emulated/node.hpp"
#include "providers/tofu/process.hpp"

#include <catch2/catch.hpp>

#include <pmr/pmr.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

using namespace pmr::detail;
using pmr_test::check_pattern;
using pmr_test::fill_pattern;
using pmr_test::message_of;

namespace {

tofu::ModelParameters model(const std::string& name, double scale = 1.0) {
    tofu::ModelParameters p = tofu::model_preset(name);
    p.time_scale = scale;
    return p;
}

/// Two nodes, `a` putting into `b`, with a region of `bytes` registered at `b` (in a memory file
/// when `in_file`, else ordinary memory reached by cross-memory attach).
struct TwoNodes {
    TwoNodes(const tofu::ModelParameters& parameters, std::size_t bytes, bool in_file,
             std::size_t depth = 8, std::size_t notices = 64) {
        tofu::NodeOptions options;
        options.model = parameters;
        options.queue_depth = depth;
        options.notice_entries = notices;
        a = tofu::Node::create(options, "node a");
        b = tofu::Node::create(options, "node b");
        b_seen_from_a = std::make_shared<tofu::RemoteNode>(b->address(), "a -> b");
        if (in_file) {
            file = SharedMapping::create(bytes, "test");
            memory = file.data();
            region = b->register_memory(memory, bytes, {file.fd(), 0});
        } else {
            plain.resize(bytes);
            memory = plain.data();
            region = b->register_memory(memory, bytes, {});
        }
        remote = tofu::RemoteRegion(region.key(), "a -> b region");
    }

    /// Polls queue `tni` of `a` until a completion comes.
    tofu::Completion complete(std::size_t tni = 0) {
        tofu::Completion c;
        const auto start = std::chrono::steady_clock::now();
        while (!a->queue(tni).poll(c)) {
            REQUIRE(std::chrono::steady_clock::now() - start < std::chrono::seconds(20));
            std::this_thread::yield();
        }
        return c;
    }
    tofu::RemoteNotice notice(std::size_t tni = 0) {
        tofu::RemoteNotice n;
        const auto start = std::chrono::steady_clock::now();
        while (!b->poll_notice(tni, n)) {
            a->queue(tni).progress();
            REQUIRE(std::chrono::steady_clock::now() - start < std::chrono::seconds(20));
            std::this_thread::yield();
        }
        return n;
    }

    std::shared_ptr<tofu::Node> a;
    std::shared_ptr<tofu::Node> b;
    std::shared_ptr<tofu::RemoteNode> b_seen_from_a;
    SharedMapping file;
    std::vector<std::byte> plain;
    std::byte* memory = nullptr;
    tofu::RegisteredRegion region;
    tofu::RemoteRegion remote;
};

} // namespace

TEST_CASE("a put lands, completes locally and notifies remotely", "[tofu]") {
    for (const bool in_file : {true, false}) {
        INFO((in_file ? "memory file" : "cross-memory attach"));
        TwoNodes n(model("off"), 100000, in_file);
        CHECK(n.a->tnis() == 4);
        CHECK(n.region.stadd() % tofu::stadd_alignment == 0);
        std::vector<std::byte> source(70000);
        fill_pattern(source.data(), source.size(), 11);
        tofu::PutFlags flags;
        flags.remote_notice = true;
        flags.edata = 0xa5;
        const char value[] = "piggyback of at most 32 bytes";
        flags.piggyback = value;
        flags.piggyback_bytes = sizeof value;
        std::uint64_t cookie = 0;
        REQUIRE(n.a->queue(2).put(n.b_seen_from_a, 3, n.remote, n.region.stadd() + 1000,
                                  source.data(), source.size(), flags, cookie) == tofu::Status::ok);
        const tofu::Completion done = n.complete(2);
        CHECK(done.cookie == cookie);
        CHECK(done.error == 0);
        const tofu::RemoteNotice notice = n.notice(3);
        CHECK(notice.source == n.a->id());
        CHECK(notice.source_tni == 2);
        CHECK(notice.stadd == n.region.stadd() + 1000);
        CHECK(notice.bytes == 70000);
        CHECK(notice.edata == 0xa5);
        CHECK(notice.piggyback_bytes == sizeof value);
        CHECK(std::memcmp(notice.piggyback.data(), value, sizeof value) == 0);
        CHECK(check_pattern(n.memory + 1000, 0, 70000, 11, "put"));
        tofu::RemoteNotice none;
        CHECK_FALSE(n.b->poll_notice(0, none)); // notices go to the TNI the put names
    }
}

TEST_CASE("a get reads a peer's registered memory", "[tofu]") {
    for (const bool in_file : {true, false}) {
        TwoNodes n(model("off"), 5000, in_file);
        fill_pattern(n.memory, 5000, 12);
        std::vector<std::byte> into(4000);
        std::uint64_t cookie = 0;
        REQUIRE(n.a->queue(0).get(n.b_seen_from_a, n.remote, n.region.stadd() + 1000, into.data(),
                                  into.size(), cookie) == tofu::Status::ok);
        CHECK(n.complete(0).cookie == cookie);
        std::vector<std::byte> expected(5000);
        fill_pattern(expected.data(), 5000, 12);
        CHECK(std::memcmp(into.data(), expected.data() + 1000, 4000) == 0);
    }
}

TEST_CASE("the published limits are enforced", "[tofu]") {
    TwoNodes n(model("off"), 1000, true);
    std::vector<std::byte> source(64);
    std::uint64_t cookie = 0;
    tofu::CommandQueue& q = n.a->queue(0);
    tofu::PutFlags plain;
    // 16 MiB - 1 per put.
    CHECK_THROWS_AS(q.put(n.b_seen_from_a, 0, n.remote, n.region.stadd(), source.data(),
                          tofu::max_put_bytes + 1, plain, cookie),
                    pmr::SizeError);
    // 32 B of piggyback, only on a notice; inline sources of at most 32 B.
    tofu::PutFlags big;
    big.remote_notice = true;
    big.piggyback = source.data();
    big.piggyback_bytes = 33;
    CHECK_THROWS_AS(
        q.put(n.b_seen_from_a, 0, n.remote, n.region.stadd(), source.data(), 8, big, cookie),
        pmr::SizeError);
    tofu::PutFlags no_notice = big;
    no_notice.remote_notice = false;
    no_notice.piggyback_bytes = 8;
    CHECK_THROWS_AS(
        q.put(n.b_seen_from_a, 0, n.remote, n.region.stadd(), source.data(), 8, no_notice, cookie),
        pmr::SizeError);
    tofu::PutFlags inline_source;
    inline_source.inline_source = true;
    CHECK_THROWS_AS(q.put(n.b_seen_from_a, 0, n.remote, n.region.stadd(), source.data(), 33,
                          inline_source, cookie),
                    pmr::SizeError);
    // Outside the region, and to a TNI the node does not have.
    const auto outside = message_of<pmr::ArgumentError>([&] {
        (void)q.put(n.b_seen_from_a, 0, n.remote, n.region.stadd() + 990, source.data(), 11, plain,
                    cookie);
    });
    CHECK(outside.find("outside the region") != std::string::npos);
    CHECK_THROWS_AS(
        q.put(n.b_seen_from_a, 4, n.remote, n.region.stadd(), source.data(), 8, plain, cookie),
        pmr::ArgumentError);
    CHECK(q.outstanding() == 0); // nothing was issued
    // Every registration gets its own 256-byte aligned range of steering addresses.
    std::vector<std::byte> other(10);
    tofu::RegisteredRegion r2 = n.b->register_memory(other.data(), other.size(), {});
    CHECK(r2.stadd() % tofu::stadd_alignment == 0);
    CHECK(r2.stadd() >= n.region.stadd() + 1000);
    // An inline source may be reused when put() returns.
    std::uint64_t word = 42;
    REQUIRE(q.put(n.b_seen_from_a, 0, n.remote, n.region.stadd() + 8, &word, sizeof word,
                  inline_source, cookie) == tofu::Status::ok);
    word = 7;
    n.complete(0);
    std::uint64_t landed = 0;
    std::memcpy(&landed, n.memory + 8, sizeof landed);
    CHECK(landed == 42);
}

TEST_CASE("a full queue answers busy until completions are polled", "[tofu]") {
    // The model holds every command for 20 ms, so the queue fills.
    tofu::ModelParameters slow = model("k", 1.0);
    slow.put_latency = 20e-3;
    TwoNodes n(slow, 4096, true, /*depth=*/2);
    tofu::CommandQueue& q = n.a->queue(1);
    std::uint64_t value = 1;
    tofu::PutFlags flags;
    flags.inline_source = true;
    std::uint64_t first = 0;
    std::uint64_t second = 0;
    std::uint64_t third = 0;
    REQUIRE(q.put(n.b_seen_from_a, 1, n.remote, n.region.stadd(), &value, 8, flags, first) ==
            tofu::Status::ok);
    REQUIRE(q.put(n.b_seen_from_a, 1, n.remote, n.region.stadd() + 8, &value, 8, flags, second) ==
            tofu::Status::ok);
    CHECK(q.put(n.b_seen_from_a, 1, n.remote, n.region.stadd() + 16, &value, 8, flags, third) ==
          tofu::Status::busy);
    CHECK(q.outstanding() == 2);
    // Finished commands still occupy the queue until their completion is polled.
    CHECK(n.complete(1).cookie == first);
    REQUIRE(q.put(n.b_seen_from_a, 1, n.remote, n.region.stadd() + 16, &value, 8, flags, third) ==
            tofu::Status::ok);
    CHECK(n.complete(1).cookie == second);
    CHECK(n.complete(1).cookie == third);
}

TEST_CASE("a notice is visible only after its data, and not before the modelled arrival",
          "[tofu]") {
    for (const bool in_file : {true, false}) {
        INFO((in_file ? "memory file" : "cross-memory attach"));
        // A 1 MiB put at 1 GB/s with 300 ms of latency: lands after about 301 ms.
        tofu::ModelParameters p = model("k");
        p.link_bandwidth = 1e9;
        p.injection_bandwidth = 1e9;
        p.put_latency = 300e-3;
        const std::size_t bytes = std::size_t{1} << 20;
        TwoNodes n(p, bytes + 64, in_file);
        std::vector<std::byte> data(bytes);
        fill_pattern(data.data(), bytes, 13);
        tofu::PutFlags plain;
        tofu::PutFlags notify;
        notify.remote_notice = true;
        notify.edata = 1;
        std::uint64_t word = 0x1234;
        notify.inline_source = true;
        std::uint64_t cookie = 0;
        const std::int64_t issued = tofu::now_ns();
        // The data, then an 8-byte flag with a notice on the same TNI.
        REQUIRE(n.a->queue(0).put(n.b_seen_from_a, 0, n.remote, n.region.stadd(), data.data(),
                                  bytes, plain, cookie) == tofu::Status::ok);
        REQUIRE(n.a->queue(0).put(n.b_seen_from_a, 0, n.remote, n.region.stadd() + bytes, &word, 8,
                                  notify, cookie) == tofu::Status::ok);
        // 10 ms in, nothing of it may be visible.
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        n.a->queue(0).progress();
        tofu::RemoteNotice early;
        CHECK_FALSE(n.b->poll_notice(0, early));
        std::uint64_t before = 0;
        std::memcpy(&before, n.memory + bytes, 8);
        CHECK(before == 0);
        CHECK(
            std::all_of(n.memory, n.memory + 4096, [](std::byte x) { return x == std::byte{0}; }));
        const tofu::RemoteNotice notice = n.notice(0);
        const double seconds = static_cast<double>(tofu::now_ns() - issued) * 1e-9;
        CHECK(seconds >= 0.300 + double(bytes) / 1e9);
        CHECK(notice.stadd == n.region.stadd() + bytes);
        // Everything before the notice is in place when it is seen.
        CHECK(check_pattern(n.memory, 0, bytes, 13, "data before notice"));
        std::uint64_t flag = 0;
        std::memcpy(&flag, n.memory + bytes, 8);
        CHECK(flag == 0x1234);
    }
}

TEST_CASE("a full notice queue holds the put back until the node polls", "[tofu]") {
    TwoNodes n(model("off"), 4096, true, 8, /*notices=*/2);
    tofu::PutFlags notify;
    notify.remote_notice = true;
    notify.inline_source = true;
    std::uint64_t value = 5;
    std::uint64_t cookie = 0;
    for (int i = 0; i < 3; ++i) {
        notify.edata = static_cast<std::uint8_t>(i);
        REQUIRE(n.a->queue(0).put(n.b_seen_from_a, 0, n.remote, n.region.stadd(), &value, 8, notify,
                                  cookie) == tofu::Status::ok);
    }
    tofu::Completion c;
    CHECK(n.a->queue(0).poll(c));
    CHECK(n.a->queue(0).poll(c));
    CHECK_FALSE(n.a->queue(0).poll(c)); // the third notice finds no room
    CHECK(n.notice(0).edata == 0);
    CHECK(n.a->queue(0).poll(c));
    CHECK(c.cookie == cookie);
    CHECK(n.notice(0).edata == 1);
    CHECK(n.notice(0).edata == 2);
}

TEST_CASE("the timing model serialises TNIs and caps injection", "[tofu][model]") {
    const std::size_t mib16 = std::size_t{16} << 20;
    SECTION("one TNI is a serial resource") {
        tofu::TimingModel m(model("k"));
        const auto first = m.schedule(0, mib16, 1, 0);
        const auto second = m.schedule(0, mib16, 1, 0);
        CHECK(first.start == 0);
        CHECK(second.start == first.done);
        // 16 MiB at 4.76 GB/s.
        CHECK(double(first.done) * 1e-9 == Approx(double(mib16) / 4.76e9).epsilon(1e-6));
        CHECK(first.land - first.done == 910);
        // Another TNI is free meanwhile.
        CHECK(m.schedule(1, 8, 1, 0).start == 0);
    }
    SECTION("the node's injection is capped") {
        for (std::size_t tnis = 1; tnis <= 4; ++tnis) {
            tofu::TimingModel m(model("k"));
            std::int64_t end = 0;
            for (std::size_t t = 0; t < tnis; ++t) {
                end = std::max(end, m.schedule(t, mib16, 1, 0).done);
            }
            const double bandwidth = double(tnis * mib16) / (double(end) * 1e-9);
            INFO(tnis << " TNIs: " << bandwidth / 1e9 << " GB/s");
            // K computer, seed 000 Figure 2: 4.76, ..., 14.26 (3 TNIs), 15.03 GB/s (4 TNIs).
            CHECK(bandwidth == Approx(std::min(4.76e9 * double(tnis), 15.03e9)).epsilon(1e-3));
            CHECK(bandwidth == Approx(m.streaming_bandwidth(tnis)).epsilon(1e-3));
        }
    }
    SECTION("a put queued behind a long one does not hold up the other TNIs' injection") {
        // A small put waits on TNI 0 behind 1 MiB; the 1 MiB puts issued meanwhile on TNIs 1
        // and 2 share the injection time left free before it (3 x 1 MiB at 15.03 GB/s take less
        // than 1 MiB at 4.76 GB/s), so all three are done as one alone would be.
        const std::size_t mib = std::size_t{1} << 20;
        tofu::TimingModel m(model("k"));
        const auto lone = m.schedule(0, mib, 1, 0);
        CHECK(m.schedule(0, 8, 1, 0).start == lone.done);
        CHECK(m.schedule(1, mib, 1, 0).done == lone.done);
        CHECK(m.schedule(2, mib, 1, 0).done == lone.done);
        // A fourth exceeds the cap: it ends when 4 MiB have passed at 15.03 GB/s.
        CHECK(double(m.schedule(3, mib, 1, 0).done) * 1e-9 ==
              Approx(4.0 * double(mib) / 15.03e9).epsilon(1e-3));
        // A small put on a TNI of its own is not held up by the large ones' injection.
        tofu::TimingModel fresh(model("k"));
        (void)fresh.schedule(0, mib, 1, 0);
        CHECK(fresh.schedule(1, 16, 1, 0).done < 10);
    }
    SECTION("hops and the time scale") {
        tofu::TimingModel m(model("fugaku"));
        const auto near = m.schedule(0, 8, 1, 0);
        tofu::TimingModel m2(model("fugaku"));
        const auto far = m2.schedule(0, 8, 4, 0);
        CHECK(far.land - near.land == 300); // 3 more hops of 100 ns
        CHECK(double(near.land) * 1e-9 == Approx(0.49e-6 + 8 / 6.8e9).epsilon(1e-3));
        CHECK(m.lone_put_seconds(8, 1) == Approx(0.49e-6 + 8 / 6.8e9));
        tofu::TimingModel slow(model("fugaku", 10.0));
        CHECK(slow.schedule(0, 8, 1, 0).land == Approx(10 * near.land).margin(2));
    }
    SECTION("off: no delay at all") {
        tofu::TimingModel m(model("off"));
        const auto t = m.schedule(0, mib16, 3, 5);
        CHECK(t.start == 5);
        CHECK(t.land == 5);
    }
    SECTION("presets and their TNIs") {
        CHECK(model("k").tnis == 4);
        CHECK(model("fugaku").tnis == 6);
        CHECK_THROWS_AS(tofu::model_preset("bluegene"), pmr::ArgumentError);
    }
}

TEST_CASE("over the provider, no round completes before the model says", "[provider]") {
    if (pmr_test::world_size() != 2) {
        return; // registered on two ranks with the model on (tests/CMakeLists.txt)
    }
    const tofu::ModelParameters& p = tofu::tofu_settings().model;
    REQUIRE(p.enabled);
    const int rank = pmr_test::world_rank();
    pmr::Connection c(pmr::Target(MPI_COMM_WORLD, 1 - rank, 7, 7), pmr::Provider::tofu);
    const std::size_t bytes = 65536;
    pmr::SendWindow<unsigned char> send(c, bytes);
    pmr::RecvWindow<unsigned char> recv(c, bytes);
    const double one_way = tofu::TimingModel(p).lone_put_seconds(bytes, 1);
    INFO("modelled one-way time " << one_way * 1e3 << " ms");
    for (int round = 1; round <= 3; ++round) {
        MPI_Barrier(MPI_COMM_WORLD);
        const auto start = std::chrono::steady_clock::now();
        recv.init();
        if (rank == 0) {
            send.init();
            fill_pattern(send.data(), bytes, pmr_test::seed_of({1, std::uint64_t(round)}));
            send.post();
            send.wait();
            recv.post();
            recv.wait();
        } else {
            recv.post();
            recv.wait();
        }
        const double arrived =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        CHECK(check_pattern(recv.data(), 0, bytes,
                            pmr_test::seed_of({std::uint64_t(2 - rank), std::uint64_t(round)}),
                            "round " + std::to_string(round)));
        if (rank == 1) {
            // The ping cannot have arrived before its modelled one-way time (less the skew of
            // leaving the barrier, well below a millisecond).
            CHECK(arrived >= one_way - 1e-3);
            send.init();
            fill_pattern(send.data(), bytes, pmr_test::seed_of({2, std::uint64_t(round)}));
            send.post();
            send.wait();
        } else {
            CHECK(arrived >= 2 * one_way); // ping and pong
        }
    }
}

TEST_CASE("a sender reuses its source at local completion and stops polling", "[provider]") {
    // Local completion comes when the TNI has read the source, a latency before the data lands:
    // the sender may overwrite its buffer at once and then make no pmr call (here: wait in an
    // MPI barrier) while the receiver still waits for the data, which must arrive intact.
    if (pmr_test::world_size() != 2) {
        return;
    }
    REQUIRE(tofu::tofu_settings().model.enabled);
    const int rank = pmr_test::world_rank();
    pmr::Connection c(pmr::Target(MPI_COMM_WORLD, 1 - rank, 8, 8), pmr::Provider::tofu);
    const std::size_t bytes = 65536 + 24;
    pmr::SendWindow<unsigned char> send(c, bytes);
    pmr::RecvWindow<unsigned char> recv(c, bytes);
    for (int round = 1; round <= 2; ++round) {
        const std::uint64_t seed = pmr_test::seed_of({7, std::uint64_t(round)});
        if (rank == 0) {
            send.init();
            fill_pattern(send.data(), bytes, seed);
            send.post();
            send.wait();
            std::memset(send.data(), 0xee, bytes);
        } else {
            recv.init();
            recv.post();
            recv.wait();
            CHECK(check_pattern(recv.data(), 0, bytes, seed, "round " + std::to_string(round)));
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
}

namespace {

/// Seconds of the slowest rank for `rounds` rounds of `round` (each between barriers): the
/// fastest round, so that a round disturbed by other load on the machine does not count.
template <class Round>
double fastest_round(int rounds, Round&& round) {
    double best = 1e30;
    for (int r = 0; r < rounds; ++r) {
        MPI_Barrier(MPI_COMM_WORLD);
        const auto start = std::chrono::steady_clock::now();
        round();
        double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        MPI_Allreduce(MPI_IN_PLACE, &seconds, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        best = std::min(best, seconds);
    }
    return best;
}

} // namespace

TEST_CASE("puts on distinct TNIs overlap as the model says", "[overlap]") {
    // Registered on 4 ranks with the model on and stretched (tests/CMakeLists.txt). Every rank
    // connects to the 3 others; its connections' rails start at TNIs 0, 1, 2 (they rotate), so
    // that in the all-to-all every rank puts 3 messages at once on 3 distinct TNIs. The model
    // says the all-to-all takes about as long as one message alone (3 x 256 KiB at 15.03 GB/s
    // of injection is less than 256 KiB at 4.76 GB/s on one link); the emulation must not
    // serialise what the model overlaps.
    const int size = pmr_test::world_size();
    if (size != 4) {
        return;
    }
    const tofu::ModelParameters& p = tofu::tofu_settings().model;
    REQUIRE(p.enabled);
    REQUIRE(p.tnis >= 3);
    const int rank = pmr_test::world_rank();
    const std::size_t bytes = std::size_t{256} * 1024;
    std::vector<std::unique_ptr<pmr::Connection>> connections;
    std::vector<std::unique_ptr<pmr::SendWindow<unsigned char>>> sends;
    std::vector<std::unique_ptr<pmr::RecvWindow<unsigned char>>> recvs;
    for (int step = 1; step < size; ++step) {
        const int peer = (rank + step) % size;
        connections.push_back(std::make_unique<pmr::Connection>(
            pmr::Target(MPI_COMM_WORLD, peer, 40, 40), pmr::Provider::tofu));
        sends.push_back(
            std::make_unique<pmr::SendWindow<unsigned char>>(*connections.back(), bytes));
        recvs.push_back(
            std::make_unique<pmr::RecvWindow<unsigned char>>(*connections.back(), bytes));
    }
    const auto exchange = [&](bool all) {
        // Lone: rank 0 to rank 1 only (rank 0's first connection, rank 1's last).
        std::vector<pmr::detail::Waitable> waits;
        for (std::size_t i = 0; i < sends.size(); ++i) {
            const bool send = all || (rank == 0 && i == 0);
            const bool receive = all || (rank == 1 && i + 1 == recvs.size());
            if (receive) {
                recvs[i]->init();
                recvs[i]->post();
                waits.push_back(pmr::detail::waitable(*recvs[i]));
            }
            if (send) {
                sends[i]->init();
                sends[i]->post();
                waits.push_back(pmr::detail::waitable(*sends[i]));
            }
        }
        pmr::detail::wait_all(waits.data(), waits.size());
    };
    const tofu::TimingModel m(p);
    const double modelled = m.lone_put_seconds(bytes, 1);
    // 1.6 when the model serialised the TNIs' injection, in every attempt. Other jobs on a
    // 2-core machine can starve the 4 ranks (which land their puts only while they run) for a
    // whole attempt: up to 3 attempts, all ranks deciding together.
    constexpr double limit = 1.4;
    double lone = 0.0;
    double ratio = 0.0;
    for (int attempt = 1; attempt <= 3; ++attempt) {
        lone = fastest_round(9, [&] { exchange(false); });
        const double all = fastest_round(9, [&] { exchange(true); });
        ratio = all / lone;
        if (rank == 0) {
            std::printf("tofu overlap, attempt %d: one %zu B put alone %.2f ms, 3 at once on 3 "
                        "TNIs from each of 4 ranks %.2f ms (ratio %.2f); the model's lone put "
                        "%.2f ms\n",
                        attempt, bytes, lone * 1e3, all * 1e3, ratio, modelled * 1e3);
        }
        if (ratio < limit) {
            break;
        }
    }
    CHECK(lone >= modelled);
    CHECK(ratio < limit);
}
