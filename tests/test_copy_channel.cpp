// SPDX-License-Identifier: MIT
// The copy channel's shared rounds (src/base/copy_channel.hpp, copy_sender.hpp) in one process:
// sender and receiver of one window pair, with cross-memory attach into this process itself, so
// that every interleaving of who copies which chunk can be forced. Checks that the data arrives
// whoever copies it, that a round ends exactly once all chunks are in, that a receiver that cannot
// read gives its chunk back, that an offer larger than the receive window writes nothing, and that
// a sender that closes mid-round leaves the receive buffer untouched.
#include "support.hpp"

#include "base/copy_sender.hpp"

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

using namespace pmr::detail;
using pmr_test::check_pattern;
using pmr_test::fill_pattern;

namespace {

constexpr std::size_t chunk = 4096;
constexpr std::size_t guard = 4096;

/// One window pair: a control block and an offer (as in the shm provider's control page), a
/// source buffer and a receive buffer with guard bytes behind it.
struct Pair {
    explicit Pair(std::size_t bytes) : source(bytes), receive(bytes + guard), capacity(bytes) {
        CopyTarget target;
        target.control = &control;
        target.remote_address = reinterpret_cast<std::uintptr_t>(receive.data());
        target.pid = getpid();
        target.cma = true;
        target.cma_threshold = chunk;
        target.offer = &offer;
        target.min_chunk = chunk;
        sender.attach(target, &where);
        receiver.attach(&control, receive.data(), nullptr);
        receiver.share(&offer, getpid(), bytes);
        fill_pattern(receive.data(), capacity, capacity + guard, 99);
    }

    /// Writes round `round`'s message and the receive buffer's sentinel.
    void prepare(std::uint64_t round, std::size_t bytes) {
        fill_pattern(source.data(), bytes, round);
        fill_pattern(receive.data(), capacity, 1000 + round);
    }

    bool arrived(std::uint64_t round, std::size_t bytes) {
        const std::string what = "round " + std::to_string(round);
        return check_pattern(receive.data(), 0, bytes, round, what) &&
               check_pattern(receive.data(), bytes, capacity, 1000 + round, what + ", behind") &&
               check_pattern(receive.data(), capacity, capacity + guard, 99, what + ", guard") &&
               receiver.received_bytes() == bytes;
    }

    /// A first round the sender copies alone: it proves that cross-memory attach works here, after
    /// which large rounds are offered.
    void first_round() {
        prepare(1, capacity);
        receiver.init();
        REQUIRE(sender.post(source.data(), capacity));
        REQUIRE(receiver.test());
        REQUIRE(arrived(1, capacity));
    }

    copy_channel::ControlBlock control;
    copy_channel::Offer offer;
    std::vector<std::byte> source;
    std::vector<std::byte> receive;
    std::size_t capacity;
    std::string where = "test window pair";
    CopySender sender;
    CopyReceiver receiver;
};

std::uint64_t chunks_of(const copy_channel::Offer& offer) {
    return (offer.claims.load() >> 8) & 0xff;
}

} // namespace

TEST_CASE("a round posted before the receiver's init is pulled by the receiver", "[shared-copy]") {
    Pair pair(10 * chunk + 123);
    pair.first_round();
    const std::size_t bytes = 7 * chunk + 5;
    pair.prepare(2, bytes);
    CHECK_FALSE(pair.sender.post(pair.source.data(), bytes)); // no credit yet: offered only
    CHECK(chunks_of(pair.offer) == 8);
    pair.receiver.init();
    REQUIRE(pair.receiver.test()); // the receiver copied all eight chunks
    CHECK(pair.arrived(2, bytes));
    CHECK(pair.offer.done.load() == 0xff);
    CHECK(pair.sender.progress()); // and the sender sees its round done
}

TEST_CASE("a sender holding the credit copies every chunk itself", "[shared-copy]") {
    Pair pair(64 * chunk);
    pair.first_round();
    for (std::uint64_t round = 2; round < 6; ++round) {
        const std::size_t bytes = round % 2 == 0 ? 64 * chunk : 3 * chunk + 1;
        pair.prepare(round, bytes);
        pair.receiver.init();
        REQUIRE(pair.sender.post(pair.source.data(), bytes));
        REQUIRE(pair.receiver.test());
        CHECK(pair.arrived(round, bytes));
    }
}

TEST_CASE("a round ends only once the chunk the other side took is in", "[shared-copy]") {
    Pair pair(6 * chunk);
    pair.first_round();
    pair.prepare(2, 6 * chunk);
    pair.receiver.init();
    // The receiver takes chunk 0 and is slow with it; the sender copies the other five.
    std::uint64_t held = 99;
    REQUIRE(copy_channel::take_chunk(pair.offer, 2, held) == false); // nothing offered yet
    // Post without the sender starting: take the credit away for a moment.
    pair.control.credit.store(1);
    CHECK_FALSE(pair.sender.post(pair.source.data(), 6 * chunk));
    REQUIRE(copy_channel::take_chunk(pair.offer, 2, held));
    CHECK(held == 0);
    pair.control.credit.store(2);
    CHECK_FALSE(pair.sender.progress()); // five chunks copied, chunk 0 still out
    CHECK_FALSE(pair.receiver.test());
    CHECK(pair.offer.done.load() == 0x3e);
    std::memcpy(pair.receive.data(), pair.source.data(), chunk); // the receiver's copy of chunk 0
    REQUIRE(copy_channel::chunk_done(pair.offer, held, 6));
    copy_channel::publish(pair.control, 2, 6 * chunk, copy_channel::Delivery::direct);
    CHECK(pair.sender.progress());
    REQUIRE(pair.receiver.test());
    CHECK(pair.arrived(2, 6 * chunk));
}

TEST_CASE("a receiver that cannot read the sender gives its chunk back", "[shared-copy]") {
    Pair pair(5 * chunk);
    pair.first_round();
    // A process that no longer exists: every read fails with ESRCH.
    const pid_t child = fork();
    if (child == 0) {
        _exit(0);
    }
    REQUIRE(child > 0);
    REQUIRE(waitpid(child, nullptr, 0) == child);
    pair.receiver.share(&pair.offer, child, pair.capacity);
    pair.prepare(2, 5 * chunk);
    pair.control.credit.store(1);
    CHECK_FALSE(pair.sender.post(pair.source.data(), 5 * chunk));
    pair.receiver.init();
    CHECK_FALSE(pair.receiver.test()); // took chunk 0, failed, gave it back
    CHECK(pair.offer.receiver_stopped.load() == 1);
    CHECK(pair.offer.returned.load() == 1);
    REQUIRE(pair.sender.progress()); // copies all five, the returned one too
    REQUIRE(pair.receiver.test());
    CHECK(pair.arrived(2, 5 * chunk));
    // The receiver never takes again; later rounds are the sender's alone.
    pair.prepare(3, 4 * chunk);
    pair.control.credit.store(2);
    CHECK_FALSE(pair.sender.post(pair.source.data(), 4 * chunk));
    pair.receiver.init();
    CHECK_FALSE(pair.receiver.test());
    CHECK(chunks_of(pair.offer) == 4);
    CHECK((pair.offer.claims.load() & 0xff) == 0);
    REQUIRE(pair.sender.progress());
    REQUIRE(pair.receiver.test());
    CHECK(pair.arrived(3, 4 * chunk));
}

TEST_CASE("an offer larger than the receive window writes nothing", "[shared-copy]") {
    Pair pair(4 * chunk);
    pair.first_round();
    pair.prepare(2, 4 * chunk);
    pair.receiver.init();
    // A buggy or hostile sender offers 64 chunks of a larger buffer.
    std::vector<std::byte> large(64 * chunk);
    copy_channel::offer(pair.offer, 2, reinterpret_cast<std::uintptr_t>(large.data()), large.size(),
                        chunk);
    CHECK_FALSE(pair.receiver.test());
    CHECK(pair.offer.receiver_stopped.load() == 1);
    CHECK(check_pattern(pair.receive.data(), 0, pair.capacity, 1002, "receive buffer"));
    CHECK(check_pattern(pair.receive.data(), pair.capacity, pair.capacity + guard, 99, "guard"));
}

TEST_CASE("a sender closed in the middle of a shared round leaves the buffer alone",
          "[shared-copy]") {
    Pair pair(8 * chunk);
    pair.first_round();
    pair.prepare(2, 8 * chunk);
    pair.control.credit.store(1);
    CHECK_FALSE(pair.sender.post(pair.source.data(), 8 * chunk));
    pair.sender.close();
    CHECK((pair.offer.claims.load() & 0xff) == copy_channel::retracted);
    pair.receiver.init();
    CHECK_FALSE(pair.receiver.test());
    CHECK(pair.receiver.sender_closed());
    CHECK(check_pattern(pair.receive.data(), 0, pair.capacity, 1002, "receive buffer"));
}
