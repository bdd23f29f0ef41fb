// SPDX-License-Identifier: MIT
// Every compiled provider in one process, over a connection to itself, through every delivery path
// (inline, direct into pmr memory, staging, cross-memory attach), before any multi-rank test.
#include "support.hpp"

#include <catch2/catch.hpp>

#include <pmr/pmr.hpp>

#include "base/copy.hpp"

#include <dirent.h>
#include <string>
#include <vector>

namespace {

using pmr_test::world_rank;

// Entries of a directory, without Open MPI's shared-memory segments: other MPI jobs running on
// the machine at the same time create and remove theirs (named vader_segment.* or sm_segment.*).
std::size_t entries_in(const char* directory) {
    std::size_t n = 0;
    if (DIR* d = opendir(directory)) {
        while (const dirent* entry = readdir(d)) {
            const std::string name = entry->d_name;
            if (name.rfind("vader_segment.", 0) != 0 && name.rfind("sm_segment.", 0) != 0) {
                ++n;
            }
        }
        closedir(d);
    }
    return n;
}

// Fills with values that depend on the round, so a stale buffer never passes.
void fill(unsigned char* data, std::size_t bytes, int round) {
    for (std::size_t i = 0; i < bytes; ++i) {
        data[i] =
            static_cast<unsigned char>((i * 131 + static_cast<std::size_t>(round) * 17) & 0xff);
    }
}

bool matches(const unsigned char* data, std::size_t bytes, int round) {
    for (std::size_t i = 0; i < bytes; ++i) {
        if (data[i] !=
            static_cast<unsigned char>((i * 131 + static_cast<std::size_t>(round) * 17) & 0xff)) {
            return false;
        }
    }
    return true;
}

enum class Memory { owned, user, pmr_user };

void loopback(pmr::Provider provider, std::size_t bytes, Memory memory, int tag) {
    INFO("provider " << pmr::to_string(provider) << ", " << bytes << " B, memory "
                     << static_cast<int>(memory));
    pmr::Connection c(pmr::Target(MPI_COMM_WORLD, world_rank(), tag, tag), provider);
    REQUIRE(c.provider() == provider);

    std::vector<unsigned char> user_send(bytes);
    std::vector<unsigned char> user_recv(bytes);
    std::vector<unsigned char, pmr::Allocator<unsigned char>> pmr_recv(bytes);
    unsigned char* recv_buffer = memory == Memory::user ? user_recv.data() : pmr_recv.data();

    pmr::SendWindow<unsigned char> send(c, user_send.data(), bytes);
    auto recv = memory == Memory::owned ? pmr::RecvWindow<unsigned char>(c, bytes)
                                        : pmr::RecvWindow<unsigned char>(c, recv_buffer, bytes);
    for (int round = 1; round <= 6; ++round) {
        fill(user_send.data(), bytes, round);
        // Vary the length: full, partial, empty.
        const std::size_t length = round % 3 == 0 ? 0 : round % 3 == 1 ? bytes : bytes / 2 + 1;
        recv.init();
        send.init();
        send.post(pmr::Elements{std::min(length, bytes)});
        recv.post();
        send.wait();
        recv.wait();
        REQUIRE(recv.received_bytes() == std::min(length, bytes));
        REQUIRE(matches(recv.data(), recv.received_bytes(), round));
    }
}

} // namespace

TEST_CASE("every compiled provider over a loopback connection", "[providers]") {
    const std::size_t shm_entries = entries_in("/dev/shm");
    int tag = 100;
    for (pmr::Provider provider : pmr_test::runnable_providers()) {
        if (provider == pmr::Provider::null) {
            continue;
        }
        // 8 B and 200 B go inline, 4 KiB below the CMA threshold (staging for user buffers),
        // 1 MiB above it (cross-memory attach into user buffers).
        for (std::size_t bytes :
             {std::size_t{8}, std::size_t{200}, std::size_t{4096}, std::size_t{1} << 20}) {
            for (Memory memory : {Memory::owned, Memory::user, Memory::pmr_user}) {
                loopback(provider, bytes, memory, tag++);
            }
        }
    }
    // Shared memory is anonymous: nothing is left behind in /dev/shm.
    CHECK(entries_in("/dev/shm") == shm_entries);
}

TEST_CASE("streaming copies are exact at every alignment and length", "[copy]") {
    // Guard bytes on both sides of the destination catch a store outside it.
    constexpr std::size_t guard = 64;
    constexpr unsigned char guard_value = 0xa5;
    for (std::size_t length : {std::size_t{0}, std::size_t{1}, std::size_t{15}, std::size_t{16},
                               std::size_t{63}, std::size_t{64}, std::size_t{65}, std::size_t{1000},
                               std::size_t{4099}, std::size_t{1} << 16}) {
        for (std::size_t source_offset = 0; source_offset < 17; source_offset += 3) {
            for (std::size_t destination_offset = 0; destination_offset < 17;
                 destination_offset += 5) {
                INFO(length << " B, source offset " << source_offset << ", destination offset "
                            << destination_offset);
                std::vector<unsigned char> source(length + source_offset);
                fill(source.data() + source_offset, length, static_cast<int>(length));
                std::vector<unsigned char> destination(guard + destination_offset + length + guard,
                                                       guard_value);
                unsigned char* to = destination.data() + guard + destination_offset;
                pmr::detail::stream_copy(
                    reinterpret_cast<std::byte*>(to),
                    reinterpret_cast<const std::byte*>(source.data() + source_offset), length);
                REQUIRE(matches(to, length, static_cast<int>(length)));
                for (std::size_t i = 0; i < guard + destination_offset; ++i) {
                    REQUIRE(destination[i] == guard_value);
                }
                for (std::size_t i = 0; i < guard; ++i) {
                    REQUIRE(to[length + i] == guard_value);
                }
            }
        }
    }
}

TEST_CASE("a window may be destroyed with a transfer in flight", "[providers]") {
    for (pmr::Provider provider : pmr_test::runnable_providers()) {
        if (provider == pmr::Provider::null) {
            continue;
        }
        INFO("provider " << pmr::to_string(provider));
        pmr::Connection c(pmr::Target(MPI_COMM_WORLD, world_rank(), 7, 7), provider);
        auto recv = std::make_unique<pmr::RecvWindow<int>>(c, 1000);
        auto send = std::make_unique<pmr::SendWindow<int>>(c, 1000);
        // The sender posts before the receiver grants: the transfer stays pending.
        send->init();
        send->post();
        recv->init(); // receiver destroyed after granting: the pending copy must not land in it
        recv.reset();
        CHECK_THROWS_AS(send->wait(), pmr::PeerLost);
    }
}

TEST_CASE("a receiver learns that its sender was destroyed", "[providers]") {
    for (pmr::Provider provider : pmr_test::runnable_providers()) {
        if (provider == pmr::Provider::null) {
            continue;
        }
        INFO("provider " << pmr::to_string(provider));
        pmr::Connection c(pmr::Target(MPI_COMM_WORLD, world_rank(), 8, 8), provider);
        auto send = std::make_unique<pmr::SendWindow<int>>(c, 10);
        pmr::RecvWindow<int> recv(c, 10);
        send->init(); // completes the set-up of the pair
        recv.init();
        recv.post();
        send.reset();
        CHECK_THROWS_AS(recv.wait(), pmr::PeerLost);
    }
}
