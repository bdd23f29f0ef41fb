// SPDX-License-Identifier: MIT
// What is particular to the ucx provider: rails and multi-rail range posts (which must also work on
// the one-rail providers), library-owned memory from UCX, remote keys that must not reach UCX when
// they are corrupt or their memory is gone, unreachable peers, and the PMR_UCX_* variables.
//
// Runs on one rank (connections to the own process, forced to ucx) and on two (the same between
// processes). CTest runs it under several UCX configurations (tests/CMakeLists.txt).
#include "support.hpp"

#include "providers/ucx/native.hpp"
#include "providers/ucx/rails.hpp"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

using namespace pmr_test;

namespace {

// Two ranks whose UCX share no transport: set before MPI_Init, so before pmr creates its contexts.
const bool split_transports = []() noexcept {
    const char* split = std::getenv("PMR_TEST_UCX_SPLIT_TLS");
    const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
    if (split != nullptr && rank != nullptr) {
        setenv("UCX_TLS", std::strcmp(rank, "0") == 0 ? "tcp" : "posix", 1);
        return true;
    }
    return false;
}();

/// Rails this process should have, from the environment.
std::size_t expected_rails() {
    if (auto devices = environment("PMR_UCX_DEVICES")) {
        return static_cast<std::size_t>(std::count(devices->begin(), devices->end(), ',')) + 1;
    }
    if (auto rails = environment("PMR_UCX_RAILS")) {
        return static_cast<std::size_t>(std::stoul(*rails));
    }
    return 1;
}

/// The peer of the two-rank cases, or the own rank.
int partner() {
    return world_size() == 2 ? 1 - world_rank() : world_rank();
}

/// Pieces that tile [0, total): uneven lengths, an empty piece, neighbours on the same rail, and
/// every rail of the connection.
std::vector<pmr::RailRange> split(std::size_t total, std::size_t rails) {
    std::vector<pmr::RailRange> pieces;
    const std::size_t count = 2 * rails + 1;
    std::size_t offset = 0;
    for (std::size_t i = 0; i < count; ++i) {
        const std::size_t rest = total - offset;
        std::size_t bytes = i + 1 == count ? rest : rest / (count - i) + (i % 3 == 0 ? 7 : 0);
        bytes = i == 1 ? 0 : std::min(bytes, rest);
        pieces.push_back({offset, bytes, (i / 2) % rails});
        offset += bytes;
    }
    return pieces;
}

/// One round of a range post between `send` and `recv`, whose peers are the windows of the
/// partner; checks what the partner sent.
template <class Send, class Recv>
void range_round(Send& send, Recv& recv, std::size_t total, std::size_t rails, std::uint64_t test,
                 int round) {
    fill_pattern(send->data(), total,
                 seed_of({test, std::uint64_t(world_rank()), std::uint64_t(round)}));
    const auto pieces = split(total, rails);
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

TEST_CASE("connections report the rails of PMR_UCX_RAILS / PMR_UCX_DEVICES", "[ucx][rails]") {
    pmr::Connection c(pmr::Target(MPI_COMM_WORLD, partner(), 1, 1), pmr::Provider::ucx);
    CHECK(c.provider() == pmr::Provider::ucx);
    CHECK(c.rails() == expected_rails());
    // Local providers have one rail.
    pmr::Connection self(pmr::Target(MPI_COMM_WORLD, world_rank(), 2, 2));
    CHECK(self.rails() == 1);
}

TEST_CASE("range posts over every rail deliver one transfer", "[ucx][rails]") {
    pmr::Connection c(pmr::Target(MPI_COMM_WORLD, partner(), 3, 3), pmr::Provider::ucx);
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

TEST_CASE("a receiver learns that its multi-rail sender is gone", "[ucx][rails]") {
    // A sender that goes away says so on every rail that carried pieces, each notice behind that
    // rail's puts and without waiting for the peer; the receiver counts it gone once all came.
    pmr::Connection c(pmr::Target(MPI_COMM_WORLD, partner(), 10, 10), pmr::Provider::ucx);
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

TEST_CASE("range posts work on the one-rail providers", "[ucx][rails]") {
    for (pmr::Provider provider : pmr::compiled_providers()) {
        if (provider == pmr::Provider::null) {
            continue;
        }
        INFO("provider " << pmr::to_string(provider));
        // Each provider once over a connection to the own process.
        pmr::Connection c(pmr::Target(MPI_COMM_WORLD, world_rank(), 4, 4), provider);
        const std::size_t rails = c.rails();
        CHECK(rails == (provider == pmr::Provider::ucx ? expected_rails() : 1));
        BufferedSend<unsigned char> send(c, Memory::owned, 70000);
        BufferedRecv<unsigned char> recv(c, Memory::user, 70000);
        for (int round = 1; round <= 2; ++round) {
            send->init();
            recv->init();
            const std::uint64_t seed = seed_of({7, std::uint64_t(round)});
            fill_pattern(send->data(), 70000, seed);
            send->post({{0, 1000, 0}, {1000, 0, rails - 1}, {1000, 69000, 0}});
            recv->post();
            send->wait();
            recv->wait();
            REQUIRE(recv->received_bytes() == 70000);
            check_pattern(recv->data(), 0, 70000, seed, recv->describe());
        }
    }
}

TEST_CASE("range posts that do not tile a prefix are refused", "[ucx][rails]") {
    pmr::Connection c(pmr::Target(MPI_COMM_WORLD, world_rank(), 5, 5), pmr::Provider::ucx);
    pmr::SendWindow<unsigned char> send(c, 100);
    pmr::RecvWindow<unsigned char> recv(c, 100);
    const std::size_t rails = c.rails();
    CHECK_THROWS_AS(send.post({{0, 10, 0}}), pmr::UsageError); // before init()
    recv.init();
    send.init();
    auto gap = message_of<pmr::ArgumentError>([&] { send.post({{0, 10, 0}, {20, 5, 0}}); });
    CHECK(gap.find("starts at byte 20, not at byte 10") != std::string::npos);
    CHECK_THROWS_AS(send.post({{5, 10, 0}}), pmr::ArgumentError);
    auto rail = message_of<pmr::ArgumentError>([&] { send.post({{0, 10, rails}}); });
    CHECK(rail.find("rail " + std::to_string(rails)) != std::string::npos);
    CHECK_THROWS_AS(send.post({{0, 60, 0}, {60, 41, 0}}), pmr::SizeError);
    // The refusals left the round open: no pieces post 0 bytes.
    send.post(nullptr, 0);
    recv.post();
    send.wait();
    recv.wait();
    CHECK(recv.received_bytes() == 0);
}

TEST_CASE("library-owned windows of a ucx-only connection live in UCX memory", "[ucx]") {
    pmr::Connection c(pmr::Target(MPI_COMM_WORLD, world_rank(), 6, 6), pmr::Provider::ucx);
    pmr::RecvWindow<double> recv(c, 1000);
    CHECK(recv.owns_memory());
    CHECK(pmr::is_pmr_memory(recv.data(), recv.bytes()));
    auto rails = pmr::detail::ucx::RailSet::existing();
    REQUIRE(rails);
    CHECK(rails->allocation(recv.data(), recv.bytes()) != nullptr);
    CHECK(std::all_of(recv.begin(), recv.end(), [](double x) { return x == 0.0; }));
    // A connection that may still choose another provider takes pmr::allocate memory.
    pmr::Connection any(pmr::Target(MPI_COMM_WORLD, world_rank(), 7, 7));
    pmr::RecvWindow<double> other(any, 1000);
    CHECK(pmr::is_pmr_memory(other.data(), other.bytes()));
    CHECK(rails->allocation(other.data(), other.bytes()) == nullptr);
}

TEST_CASE("corrupt remote keys are refused before UCX sees them", "[ucx][rkey]") {
    using namespace pmr::detail;
    auto rails = ucx::RailSet::instance("test");
    auto endpoint = rails->endpoint(0, rails->rail(0).worker->address(), false, "test");
    auto memory = ucx::MemoryHandle::allocate(rails->rail(0).context, 4096, 4096, "test");
    const Blob packed = memory.pack("test");

    BlobWriter writer;
    ucx::put_key(writer, packed);
    Blob framed = writer.take();
    {
        BlobReader reader(framed);
        ucx::RemoteKey key(endpoint, ucx::get_key(reader, "inbox", "test"), "inbox", "test");
        CHECK(key);
    }
    framed.back() ^= std::byte{0x5a};
    BlobReader reader(framed);
    auto corrupt = message_of<pmr::ProviderError>([&] { ucx::get_key(reader, "inbox", "test"); });
    CHECK(corrupt.find("remote key for its inbox is corrupt") != std::string::npos);

    auto shorter = message_of<pmr::ProviderError>(
        [&] { ucx::RemoteKey(endpoint, Blob(3), "receive buffer", "here"); });
    CHECK(shorter.find("malformed") != std::string::npos);
    CHECK(shorter.find("[here]") != std::string::npos);
}

TEST_CASE("a receive window destroyed before its sender's first use", "[ucx][rkey]") {
    // The sender unpacks the keys of memory whose window is gone: UCX must not crash on them (the
    // window kept its memory for exactly this), and the send must not complete.
    pmr::Connection c(pmr::Target(MPI_COMM_WORLD, world_rank(), 8, 8), pmr::Provider::ucx);
    auto recv = std::make_unique<pmr::RecvWindow<int>>(c, 1000);
    pmr::SendWindow<int> send(c, 1000);
    recv.reset();
    send.init();
    send.post();
    const auto start = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - start < std::chrono::milliseconds(300)) {
        try {
            REQUIRE_FALSE(send.test());
        } catch (const pmr::PeerLost&) {
            break; // also fine: the sender learnt that its receiver is gone
        }
    }
}

TEST_CASE("PMR_UCX_* variables are checked", "[ucx][env]") {
    using pmr::detail::ucx::read_ucx_settings;
    struct Restore {
        std::vector<std::pair<std::string, std::optional<std::string>>> saved;
        void set(const char* name, const char* value) {
            saved.emplace_back(name, environment(name));
            if (value != nullptr) {
                setenv(name, value, 1);
            } else {
                unsetenv(name);
            }
        }
        ~Restore() {
            for (auto it = saved.rbegin(); it != saved.rend(); ++it) {
                if (it->second) {
                    setenv(it->first.c_str(), it->second->c_str(), 1);
                } else {
                    unsetenv(it->first.c_str());
                }
            }
        }
    } env;
    env.set("PMR_UCX_DEVICES", nullptr);
    env.set("PMR_UCX_RAILS", "3");
    CHECK(read_ucx_settings().rails == 3);
    env.set("PMR_UCX_DEVICES", "lo,lo");
    env.set("PMR_UCX_RAILS", nullptr);
    auto s = read_ucx_settings();
    CHECK(s.rails == 2);
    CHECK(s.devices == std::vector<std::string>{"lo", "lo"});
    env.set("PMR_UCX_RAILS", "3");
    CHECK(message_of<pmr::ArgumentError>(read_ucx_settings).find("disagrees") != std::string::npos);
    env.set("PMR_UCX_RAILS", nullptr);
    env.set("PMR_UCX_DEVICES", "lo,no-such-device0");
    CHECK(message_of<pmr::ArgumentError>(read_ucx_settings).find("no-such-device0") !=
          std::string::npos);
    env.set("PMR_UCX_DEVICES", "lo,,lo");
    CHECK_THROWS_AS(read_ucx_settings(), pmr::ArgumentError);
    env.set("PMR_UCX_DEVICES", nullptr);
    for (const char* bad : {"0", "17", "two", "-1"}) {
        env.set("PMR_UCX_RAILS", bad);
        CHECK_THROWS_AS(read_ucx_settings(), pmr::ArgumentError);
    }
    env.set("PMR_UCX_RAILS", nullptr);
    env.set("PMR_UCX_RKEY_PTR", "0");
    CHECK_FALSE(read_ucx_settings().load_store);
    env.set("PMR_UCX_PEER_ERRORS", "maybe");
    CHECK_THROWS_AS(read_ucx_settings(), pmr::ArgumentError);
    env.set("PMR_UCX_PEER_ERRORS", "on");
    env.set("PMR_UCX_SIGNAL", "put");
    s = read_ucx_settings();
    CHECK(s.peer_errors == pmr::detail::ucx::UcxSettings::PeerErrors::on);
    CHECK(s.signal == pmr::detail::ucx::UcxSettings::Signal::put);
}

TEST_CASE("peers without a UCX transport in common get a clear error", "[.][unreachable]") {
    // Registered with PMR_TEST_UCX_SPLIT_TLS=1: rank 0 has only TCP, rank 1 only shared memory.
    REQUIRE(split_transports);
    REQUIRE(world_size() == 2);
    pmr::Connection c(pmr::Target(MPI_COMM_WORLD, partner(), 9, 9), pmr::Provider::ucx);
    auto m = message_of<pmr::ProviderError>([&] { c.establish(); });
    CHECK(m.find("Destination is unreachable") != std::string::npos);
    CHECK(m.find("no UCX transport in common") != std::string::npos);
    CHECK(m.find("peer " + std::to_string(partner())) != std::string::npos);
}
