// SPDX-License-Identifier: MIT
// Rails, for every provider that has them: range posts over the real provider
// (PMR_TEST_RAIL_PROVIDER, default ucx) between ranks and to the own process. The rail protocol of
// src/rails over an in-process transport is in test_rails_protocol.cpp, part of the same program.
// CTest registers it under each provider's rail configurations.
#include "support.hpp"

#include <algorithm>
#include <cctype>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

using namespace pmr_test;

namespace {

/// The provider with rails under test: PMR_TEST_RAIL_PROVIDER, by default ucx.
pmr::Provider rail_provider() {
    const auto name = environment("PMR_TEST_RAIL_PROVIDER").value_or("ucx");
    const auto provider = pmr::provider_from_string(name);
    REQUIRE(provider);
    return *provider;
}

/// Rails a connection of `provider` should have, from the environment: the provider's own
/// variables first, then PMR_DEVICES / PMR_RAILS (rails/settings.hpp); without them one rail, or
/// for tofu one per TNI of the emulated node (PMR_TOFU_TNIS, else the timing model's count).
std::size_t expected_rails(pmr::Provider provider) {
    std::string upper(pmr::to_string(provider));
    for (char& c : upper) {
        c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    }
    for (const std::string& prefix : {"PMR_" + upper + "_", std::string("PMR_")}) {
        if (auto devices = environment((prefix + "DEVICES").c_str())) {
            return static_cast<std::size_t>(std::count(devices->begin(), devices->end(), ',')) + 1;
        }
        if (auto rails = environment((prefix + "RAILS").c_str())) {
            return static_cast<std::size_t>(std::stoul(*rails));
        }
    }
    if (pmr::to_string(provider) == "tofu") {
        if (auto tnis = environment("PMR_TOFU_TNIS")) {
            return static_cast<std::size_t>(std::stoul(*tnis));
        }
        const auto model = environment("PMR_TOFU_MODEL").value_or("fugaku");
        return model == "fugaku" ? 6 : 4;
    }
    return 1;
}

std::size_t expected_rails() {
    return expected_rails(rail_provider());
}

/// The devices named for `provider`'s rails (its own PMR_<P>_DEVICES, else PMR_DEVICES), or none.
std::vector<std::string> named_devices(pmr::Provider provider) {
    std::string upper(pmr::to_string(provider));
    for (char& c : upper) {
        c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    }
    for (const std::string& name : {"PMR_" + upper + "_DEVICES", std::string("PMR_DEVICES")}) {
        if (auto devices = environment(name.c_str())) {
            std::vector<std::string> names;
            std::size_t begin = 0;
            for (std::size_t comma; (comma = devices->find(',', begin)) != std::string::npos;
                 begin = comma + 1) {
                names.push_back(devices->substr(begin, comma - begin));
            }
            names.push_back(devices->substr(begin));
            return names;
        }
    }
    return {};
}

/// The peer of the two-rank cases, or the own rank.
int partner() {
    return world_size() == 2 ? 1 - world_rank() : world_rank();
}

/// The same pieces for a window of bytes, whose elements are bytes.
std::vector<pmr::RailSlice> as_slices(const std::vector<pmr::RailRange>& ranges) {
    std::vector<pmr::RailSlice> slices;
    slices.reserve(ranges.size());
    for (const pmr::RailRange& r : ranges) {
        slices.push_back({r.offset, r.bytes, r.rail});
    }
    return slices;
}

/// One round of a range post between `send` and `recv`, whose peers are the windows of the
/// partner; checks what the partner sent.
template <class Send, class Recv>
void range_round(Send& send, Recv& recv, std::size_t total, std::size_t rails, std::uint64_t test,
                 int round) {
    fill_pattern(send->data(), total,
                 seed_of({test, std::uint64_t(world_rank()), std::uint64_t(round)}));
    const auto pieces = as_slices(rail_pieces(total, rails));
    recv->init();
    send->init();
    send->post(pieces.data(), pieces.size());
    recv->post();
    send->wait();
    recv->wait();
    REQUIRE(recv->received_bytes() == total);
    check_pattern(recv->data(), 0, total,
                  seed_of({test, std::uint64_t(partner()), std::uint64_t(round)}),
                  recv->describe());
}

} // namespace

TEST_CASE("connections report the rails of PMR_RAILS / PMR_DEVICES", "[rails]") {
    pmr::Connection c(pmr::Target(MPI_COMM_WORLD, partner(), 1, 1), rail_provider());
    CHECK(c.provider() == rail_provider());
    CHECK(c.rails() == expected_rails());
    // Each rail is described, on the devices named where the environment names them.
    const auto devices = named_devices(rail_provider());
    for (std::size_t i = 0; i < c.rails(); ++i) {
        const pmr::RailInfo rail = c.rail(i);
        CHECK(rail.bandwidth >= 0.0);
        if (!devices.empty()) {
            CHECK(rail.device == devices[i]);
        }
    }
    const auto bad = message_of<pmr::ArgumentError>([&] { (void)c.rail(c.rails()); });
    CHECK(bad.find(std::to_string(c.rails())) != std::string::npos);
    // Local providers have one rail.
    pmr::Connection self(pmr::Target(MPI_COMM_WORLD, world_rank(), 2, 2));
    CHECK(self.rails() == 1);
    CHECK_NOTHROW(self.rail(0));
    CHECK_THROWS_AS(self.rail(1), pmr::ArgumentError);
}

TEST_CASE("range posts over every rail deliver one transfer", "[rails]") {
    pmr::Connection c(pmr::Target(MPI_COMM_WORLD, partner(), 3, 3), rail_provider());
    const std::size_t rails = c.rails();
    std::uint64_t test = 100;
    for (std::size_t bytes : {std::size_t{100}, std::size_t{5000}, (std::size_t{1} << 20) + 3}) {
        for (Memory memory : all_memory) {
            INFO(bytes << " B, receive memory " << to_string(memory) << ", " << rails
                       << " rail(s)");
            BufferedSend<unsigned char> send(c, Memory::user, bytes);
            BufferedRecv<unsigned char> recv(c, memory, bytes);
            for (int round = 1; round <= 3; ++round) {
                // Whole window, then a prefix.
                range_round(send, recv, round == 2 ? bytes / 2 + 1 : bytes, rails, test, round);
            }
            ++test;
        }
    }
}

TEST_CASE("a receiver learns that its multi-rail sender is gone", "[rails]") {
    // A sender that goes away says so on every rail that carried pieces, each notice behind that
    // rail's puts and without waiting for the peer; the receiver counts it gone once all came.
    pmr::Connection c(pmr::Target(MPI_COMM_WORLD, partner(), 10, 10), rail_provider());
    const std::size_t rails = c.rails();
    const std::size_t bytes = 100000;
    std::optional<BufferedSend<unsigned char>> send;
    send.emplace(c, Memory::user, bytes);
    BufferedRecv<unsigned char> recv(c, Memory::user, bytes);
    for (int round = 1; round <= 2; ++round) {
        range_round(*send, recv, bytes, rails, 200, round);
    }
    send.reset();
    recv->init();
    recv->post();
    const auto lost = message_of<pmr::PeerLost>([&] { recv->wait(); });
    CHECK(lost.find("destroyed its send window") != std::string::npos);
}

TEST_CASE("range posts work on every provider", "[rails]") {
    for (pmr::Provider provider : runnable_providers()) {
        if (provider == pmr::Provider::null) {
            continue;
        }
        INFO("provider " << pmr::to_string(provider));
        // Each provider once over a connection to the own process.
        pmr::Connection c(pmr::Target(MPI_COMM_WORLD, world_rank(), 4, 4), provider);
        const std::size_t rails = c.rails();
        const std::string_view name = pmr::to_string(provider);
        const bool with_rails = name == "ucx" || name == "tofu" || name == "verbs";
        CHECK(rails == (with_rails ? expected_rails(provider) : 1));
        BufferedSend<unsigned char> send(c, Memory::owned, 70000);
        BufferedRecv<unsigned char> recv(c, Memory::user, 70000);
        for (int round = 1; round <= 2; ++round) {
            send->init();
            recv->init();
            const std::uint64_t seed = seed_of({7, std::uint64_t(round)});
            fill_pattern(send->data(), 70000, seed);
            send->post({pmr::RailSlice{0, 1000, 0}, pmr::RailSlice{1000, 0, rails - 1},
                        pmr::RailSlice{1000, 69000, 0}});
            recv->post();
            send->wait();
            recv->wait();
            REQUIRE(recv->received_bytes() == 70000);
            check_pattern(recv->data(), 0, 70000, seed, recv->describe());
        }
    }
}

TEST_CASE("range posts that do not tile a prefix are refused", "[rails]") {
    pmr::Connection c(pmr::Target(MPI_COMM_WORLD, world_rank(), 5, 5), rail_provider());
    pmr::SendWindow<unsigned char> send(c, 100);
    pmr::RecvWindow<unsigned char> recv(c, 100);
    const std::size_t rails = c.rails();
    using Slice = pmr::RailSlice;
    CHECK_THROWS_AS(send.post({Slice{0, 10, 0}}), pmr::UsageError); // before init()
    recv.init();
    send.init();
    auto gap = message_of<pmr::ArgumentError>([&] {
        send.post({Slice{0, 10, 0}, Slice{20, 5, 0}});
    });
    CHECK(gap.find("starts at element 20, not at element 10") != std::string::npos);
    CHECK_THROWS_AS(send.post({Slice{5, 10, 0}}), pmr::ArgumentError);
    auto rail = message_of<pmr::ArgumentError>([&] { send.post({Slice{0, 10, rails}}); });
    CHECK(rail.find("rail " + std::to_string(rails)) != std::string::npos);
    CHECK_THROWS_AS(send.post({Slice{0, 60, 0}, Slice{60, 41, 0}}), pmr::SizeError);
    // The refusals left the round open: no pieces post 0 elements.
    send.post(static_cast<const Slice*>(nullptr), 0);
    recv.post();
    send.wait();
    recv.wait();
    CHECK(recv.received_bytes() == 0);
}
