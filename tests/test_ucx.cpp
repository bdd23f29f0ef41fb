// SPDX-License-Identifier: MIT
// What is particular to the ucx provider: library-owned memory from UCX, remote keys that must not
// reach UCX when they are corrupt or their memory is gone, unreachable peers, and the PMR_UCX_*
// variables. Its rails are tested with those of every provider in test_rails.cpp.
//
// Runs on one rank (connections to the own process, forced to ucx) and on two (the same between
// processes). CTest runs it under several UCX configurations (tests/CMakeLists.txt).
#include "support.hpp"

#include "base/shared_memory.hpp"
#include "providers/ucx/native.hpp"
#include "providers/ucx/process.hpp"

#include <algorithm>
#include <arpa/inet.h>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <sys/socket.h>
#include <unistd.h>
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

// Two ranks that stream different windows through pmr's TCP lanes: rank 0 every window with data,
// rank 1 those from 64 KiB (the default). Each must read what the other streams.
[[maybe_unused]] const bool split_lane_bytes = []() noexcept {
    const char* split = std::getenv("PMR_TEST_UCX_SPLIT_LANE_BYTES");
    const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
    if (split != nullptr && rank != nullptr && std::strcmp(rank, "0") == 0) {
        setenv("PMR_UCX_LANE_BYTES", "1", 1);
        return true;
    }
    return false;
}();

/// The peer of the two-rank cases, or the own rank.
int partner() {
    return world_size() == 2 ? 1 - world_rank() : world_rank();
}

} // namespace

TEST_CASE("library-owned windows of a ucx-only connection live in UCX memory", "[ucx]") {
    pmr::Connection c(pmr::Target(MPI_COMM_WORLD, world_rank(), 6, 6), pmr::Provider::ucx);
    pmr::RecvWindow<double> recv(c, 1000);
    CHECK(recv.owns_memory());
    CHECK(pmr::is_pmr_memory(recv.data(), recv.bytes()));
    auto rails = pmr::detail::ucx::UcxProcess::existing();
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
    auto rails = ucx::UcxProcess::instance("test");
    auto endpoint = rails->endpoint(0, rails->rail(0).worker->address(), false, "test");
    auto memory = rails->arena_block(4096, "test");
    const Blob packed = memory->pack();

    BlobWriter writer;
    ucx::put_key(writer, packed);
    Blob framed = writer.take();
    {
        BlobReader reader(framed);
        ucx::RemoteKey key(endpoint, ucx::get_key(reader, "inbox", "test"), "inbox", "test",
                           getpid());
        CHECK(key);
    }
    framed.back() ^= std::byte{0x5a};
    BlobReader reader(framed);
    auto corrupt = message_of<pmr::ProviderError>([&] { ucx::get_key(reader, "inbox", "test"); });
    CHECK(corrupt.find("remote key for its inbox is corrupt") != std::string::npos);

    auto shorter = message_of<pmr::ProviderError>(
        [&] { ucx::RemoteKey(endpoint, Blob(3), "receive buffer", "here", 0); });
    CHECK(shorter.find("malformed") != std::string::npos);
    CHECK(shorter.find("[here]") != std::string::npos);
}

TEST_CASE("blocks of one arena segment share one registration and one unpacked key",
          "[ucx][rkey]") {
    using namespace pmr::detail;
    auto rails = ucx::UcxProcess::instance("test");
    auto endpoint = rails->endpoint(0, rails->rail(0).worker->address(), false, "test");
    auto first = rails->arena_block(4096, "test");
    auto second = rails->arena_block(100, "test");
    if (!rails->settings().load_store) {
        // PMR_UCX_RKEY_PTR=0 (puts on the node too): UCX's own memory, a registration per block,
        // into which UCX's shared-memory transports put without the owner's progress.
        CHECK(locate(first->data(), 4096).fd < 0);
        CHECK(locate(second->data(), 100).fd < 0);
        CHECK(first->pack() != second->pack());
        CHECK(std::all_of(second->data(), second->data() + 100,
                          [](std::byte b) { return b == std::byte{0}; }));
        return;
    }
    REQUIRE(locate(first->data(), 4096).segment != 0);
    REQUIRE(locate(second->data(), 100).segment == locate(first->data(), 4096).segment);
    CHECK(first->pack() == second->pack()); // packed once per segment
    CHECK(std::all_of(second->data(), second->data() + 100,
                      [](std::byte b) { return b == std::byte{0}; }));
    const ucx::RemoteKey a(endpoint, first->pack(), "inbox", "test", getpid());
    const ucx::RemoteKey b(endpoint, second->pack(), "inbox", "test", getpid());
    CHECK(a.get() == b.get()); // unpacked once per endpoint
    // A peer on this node maps the segment itself (here: this process's own arena).
    const auto address = reinterpret_cast<std::uintptr_t>(second->data());
    std::byte* mapped = b.pointer(address);
    const std::string transports = pmr_test::environment("UCX_TLS").value_or("all");
    const bool shared_memory = transports.find("all") != std::string::npos ||
                               transports.find("posix") != std::string::npos ||
                               transports.find("sysv") != std::string::npos ||
                               transports.find("shm") != std::string::npos;
    if (shared_memory) {
        REQUIRE(mapped != nullptr);
        mapped[7] = std::byte{42};
        CHECK(second->data()[7] == std::byte{42});
    } else { // UCX_TLS=tcp: the put path, as if the peer ran on another node
        CHECK(mapped == nullptr);
    }
    // User memory is registered alone, and only the put path reaches it.
    std::vector<std::byte> user(4096);
    auto registered = std::make_shared<ucx::MemoryHandle>(
        ucx::MemoryHandle::map(rails->rail(0).context, user.data(), user.size(), "test"));
    const ucx::RemoteKey c(endpoint, registered->pack(), "receive buffer", "test", getpid());
    CHECK(c.get() != a.get());
    CHECK(c.pointer(reinterpret_cast<std::uintptr_t>(user.data())) == nullptr);
}

TEST_CASE("a receive window destroyed before its sender's first use", "[ucx][rkey]") {
    // The receive window withdrew: on a self connection the withdrawal, sent after the
    // description, has arrived by the sender's first use, which must be a UsageError naming the
    // window (not a send into the keys of memory whose window is gone).
    pmr::Connection c(pmr::Target(MPI_COMM_WORLD, world_rank(), 8, 8), pmr::Provider::ucx);
    auto recv = std::make_unique<pmr::RecvWindow<int>>(c, 1000);
    pmr::SendWindow<int> send(c, 1000);
    recv.reset();
    const auto message = message_of<pmr::UsageError>([&] { send.init(); });
    CHECK(message.find("destroyed its receive window #0") != std::string::npos);
}

TEST_CASE("PMR_UCX_* variables are checked", "[ucx][env]") {
    using pmr::detail::ucx::read_ucx_settings;
    ScopedEnvironment env;
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
    env.set("PMR_UCX_PATH", nullptr);
    s = read_ucx_settings();
    CHECK(s.peer_errors == pmr::detail::ucx::UcxSettings::PeerErrors::on);
    CHECK(s.signal == pmr::detail::ucx::UcxSettings::Signal::put);
    CHECK(s.path == pmr::detail::ucx::UcxSettings::Path::automatic);
    env.set("PMR_UCX_PATH", "message");
    CHECK(read_ucx_settings().path == pmr::detail::ucx::UcxSettings::Path::message);
    env.set("PMR_UCX_PATH", "put");
    CHECK(read_ucx_settings().path == pmr::detail::ucx::UcxSettings::Path::put);
    env.set("PMR_UCX_PATH", "am");
    CHECK(message_of<pmr::ArgumentError>(read_ucx_settings).find("PMR_UCX_PATH='am'") !=
          std::string::npos);
    env.set("PMR_UCX_PATH", nullptr);
    env.set("PMR_UCX_LANES", nullptr);
    CHECK(read_ucx_settings().lanes);
    env.set("PMR_UCX_LANES", "off");
    CHECK_FALSE(read_ucx_settings().lanes);
    env.set("PMR_UCX_LANES", "auto");
    CHECK(read_ucx_settings().lanes);
    env.set("PMR_UCX_LANES", "sometimes");
    CHECK(message_of<pmr::ArgumentError>(read_ucx_settings).find("PMR_UCX_LANES='sometimes'") !=
          std::string::npos);
    env.set("PMR_UCX_LANES", nullptr);
    using pmr::detail::ucx::UcxSettings;
    env.set("PMR_UCX_LANE_BYTES", nullptr);
    CHECK(read_ucx_settings().lane_bytes == UcxSettings::default_lane_bytes);
    env.set("PMR_UCX_LANE_BYTES", "1048576");
    CHECK(read_ucx_settings().lane_bytes == 1048576);
    env.set("PMR_UCX_LANE_BYTES", "64KiB");
    CHECK(message_of<pmr::ArgumentError>(read_ucx_settings).find("PMR_UCX_LANE_BYTES='64KiB'") !=
          std::string::npos);
    env.set("PMR_UCX_LANE_BYTES", nullptr);
    env.set("PMR_UCX_RNDV_BYTES", nullptr);
    CHECK_FALSE(read_ucx_settings().rendezvous_bytes); // chosen per connection
    env.set("PMR_UCX_RNDV_BYTES", "0");
    CHECK(read_ucx_settings().rendezvous_bytes == std::size_t{0});
    env.set("PMR_UCX_RNDV_BYTES", "4096");
    CHECK(read_ucx_settings().rendezvous_bytes == std::size_t{4096});
    env.set("PMR_UCX_RNDV_BYTES", nullptr);
    env.set("PMR_UCX_CHUNK_BYTES", nullptr);
    CHECK(read_ucx_settings().chunk_bytes == UcxSettings::default_chunk_bytes);
    CHECK(UcxSettings::default_chunk_bytes < std::size_t{64} * 1024); // one UCX TCP receive segment
    env.set("PMR_UCX_CHUNK_BYTES", "0");
    CHECK(read_ucx_settings().chunk_bytes == 0);
    env.set("PMR_UCX_CHUNK_BYTES", "8192");
    CHECK(read_ucx_settings().chunk_bytes == 8192);
    env.set("PMR_UCX_CHUNK_BYTES", "100"); // a message per 100 B: refused
    CHECK(message_of<pmr::ArgumentError>(read_ucx_settings).find("at least 1024") !=
          std::string::npos);
    env.set("PMR_UCX_CHUNK_BYTES", "64k"); // sizes take K, M and G everywhere (pmr/settings.hpp)
    CHECK(read_ucx_settings().chunk_bytes == std::size_t{64} * 1024);
    env.set("PMR_UCX_CHUNK_BYTES", "64kB");
    CHECK(message_of<pmr::ArgumentError>(read_ucx_settings).find("PMR_UCX_CHUNK_BYTES='64kB'") !=
          std::string::npos);
    env.set("PMR_UCX_CHUNK_BYTES", nullptr);
    env.set("PMR_UCX_RNDV_BYTES", "1M");
    CHECK(read_ucx_settings().rendezvous_bytes == std::size_t{1} << 20);
    for (const char* bad : {"-1", "1Q", "", "x"}) {
        env.set("PMR_UCX_RNDV_BYTES", bad);
        if (*bad == '\0') { // empty counts as unset
            CHECK_FALSE(read_ucx_settings().rendezvous_bytes);
        } else {
            CHECK(message_of<pmr::ArgumentError>(read_ucx_settings).find("PMR_UCX_RNDV_BYTES") !=
                  std::string::npos);
        }
    }
}

TEST_CASE("emulated RMA is told from the lanes UCX lists", "[ucx][path]") {
    using pmr::detail::ucx::lanes_emulate_rma;
    // The shape of ucp_ep_print_info in UCX 1.13 (TCP and shared memory as printed here).
    const std::string tcp = "#  lane[0]:  0:tcp/lo.0 md[0]  -> md[0]/tcp/sysdev[255] rma_bw#0 am "
                            "am_bw#0 wireup\n#\n#  am_send: 0..<egr/short>..8185..<rndv>..(inf)\n"
                            "#  rma_bw: mds [0] rndv_rkey_size 10\n";
    const std::string shm = "#  lane[0]:  0:self/memory0.0 md[0] -> md[0]/self/sysdev[255] am\n"
                            "#  lane[1]:  4:posix/memory.0 md[3] -> md[3]/posix/sysdev[255]\n"
                            "#  lane[2]:  5:cma/memory.0 md[4] -> md[4]/cma/sysdev[255] rma_bw#0\n"
                            "#  put[0]: 0..<short>..4294967296..<bcopy>..(inf)\n";
    const std::string rdma = "#  lane[0]:  2:rc_mlx5/mlx5_0:1.0 md[2] -> md[2]/ib/sysdev[0] rma#0 "
                             "rma_bw#0 am am_bw#0\n";
    CHECK(lanes_emulate_rma(tcp));
    CHECK_FALSE(lanes_emulate_rma(shm));
    CHECK_FALSE(lanes_emulate_rma(rdma));
    CHECK(lanes_emulate_rma("#  lane[0]:  0:ud_mlx5/mlx5_0:1.0 md[0] -> md[0]/ib am wireup\n"));
    CHECK(lanes_emulate_rma("#  lane[0]:  0:tcp/eth0.0 md[0] -> md[0]/tcp rma#0 am\n"));
    CHECK(lanes_emulate_rma("")); // nothing listed: messages work everywhere
}

TEST_CASE("the device of a TCP lane is read from the lanes UCX lists", "[ucx][lanes]") {
    using pmr::detail::ucx::tcp_lane_device;
    CHECK(tcp_lane_device(
              "#  lane[0]:  0:tcp/lo.0 md[0]  -> md[0]/tcp/sysdev[255] rma_bw#0 am\n") == "lo");
    CHECK(tcp_lane_device("#  lane[0]:  1:tcp/veth-r2.0 md[1] -> md[1]/tcp am\n") == "veth-r2");
    CHECK(tcp_lane_device("#  lane[0]:  0:tcp/eth0.100.0 md[0] -> md[0]/tcp am\n") ==
          "eth0.100"); // a VLAN device keeps its dot
    CHECK(tcp_lane_device("#  lane[0]:  0:self/memory0.0 md[0] -> md[0]/self am\n"
                          "#  lane[1]:  1:tcp/lo.0 md[1] -> md[1]/tcp am_bw#0\n")
              .empty()); // the first lane is not TCP: no lanes
    CHECK(
        tcp_lane_device("#  lane[0]:  2:rc_mlx5/mlx5_0:1.0 md[2] -> md[2]/ib rma#0 am\n").empty());
    CHECK(tcp_lane_device("").empty());
}

TEST_CASE("large rounds take the TCP lanes; small rounds and the close follow them in order",
          "[ucx][lanes]") {
    // Over UCX's TCP transport a window above 64 KiB sends every message through pmr's own TCP
    // lane (providers/ucx/lanes.hpp): large rounds read straight into the receive buffer, small
    // ones (some ahead of the receiver's init) and the sender_closed behind them, in order. The
    // sender destroys its window right after its last wait (its data may still be in the
    // kernel): the receiver must still get every round intact, not PeerLost.
    if (world_size() != 2) {
        return;
    }
    const char* tls = std::getenv("UCX_TLS");
    const char* lanes_setting = std::getenv("PMR_UCX_LANES");
    const char* path = std::getenv("PMR_UCX_PATH");
    const bool lanes = tls != nullptr && std::string(tls) == "tcp" &&
                       (lanes_setting == nullptr || std::string(lanes_setting) != "off") &&
                       (path == nullptr || std::string(path) != "put");
    pmr::Connection c(pmr::Target(MPI_COMM_WORLD, partner(), 12, 12), pmr::Provider::ucx);
    constexpr std::size_t count = 300000; // 1.2 MB of int
    const std::size_t sizes[] = {count, 10, 3000, count, 1, 0, count, 20000, 58, count, 7};
    const bool sender = world_rank() == 0;
    auto value = [](std::size_t i, std::size_t round) {
        return static_cast<int>(i * 2654435761U + round * 97U);
    };
    auto frames = [] {
        auto process = pmr::detail::ucx::UcxProcess::existing();
        return process && process->lanes() != nullptr ? process->lanes()->frames() : 0;
    };
    const std::uint64_t frames_before = frames();
    if (sender) {
        pmr::SendWindow<int> send(c, count);
        for (std::size_t round = 0; round < std::size(sizes); ++round) {
            send.init();
            for (std::size_t i = 0; i < sizes[round]; ++i) {
                send[i] = value(i, round);
            }
            send.post(pmr::Elements{sizes[round]});
            send.wait();
        }
    } else {
        pmr::RecvWindow<int> recv(c, count);
        for (std::size_t round = 0; round < std::size(sizes); ++round) {
            INFO("round " << round << ", " << sizes[round] << " int");
            recv.init();
            recv.post();
            recv.wait();
            REQUIRE(recv.received_bytes() == sizes[round] * sizeof(int));
            bool intact = true;
            for (std::size_t i = 0; i < sizes[round]; ++i) {
                intact = intact && recv[i] == value(i, round);
            }
            REQUIRE(intact);
        }
        // Every round came through the lane (one frame each), or none did.
        const std::uint64_t read = frames() - frames_before;
        if (lanes) {
            CHECK(read >= std::size(sizes));
        } else {
            CHECK(read == 0);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

TEST_CASE("clients of the TCP lanes' listener that never introduce themselves are turned away",
          "[ucx][lanes]") {
    // The listener takes connections from any address: a client that connects and says nothing
    // may hold a descriptor only for a while; beyond max_strangers of them, the oldest that have
    // been silent for a second are closed. Each rank checks its own listener.
    using pmr::detail::ucx::TcpLanes;
    auto process = pmr::detail::ucx::UcxProcess::instance("test");
    TcpLanes* lanes = process->lanes();
    if (lanes == nullptr || !lanes->listening()) {
        WARN("this process has no TCP lanes (PMR_UCX_LANES=off, or no listener): nothing to check");
        return;
    }
    const std::size_t before = lanes->strangers();
    const std::size_t extra = 10;
    std::vector<int> clients;
    for (std::size_t i = 0; i < TcpLanes::max_strangers + extra; ++i) {
        const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        REQUIRE(fd >= 0);
        sockaddr_in address{};
        address.sin_family = AF_INET;
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        address.sin_port = htons(lanes->port());
        REQUIRE(::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0);
        clients.push_back(fd);
    }
    // A client the listener closed reads the end of its stream.
    auto closed = [](int fd) {
        char byte = 0;
        return ::recv(fd, &byte, 1, MSG_DONTWAIT | MSG_PEEK) == 0;
    };
    std::vector<bool> turned_away(clients.size(), false);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    std::size_t count = 0;
    while (count < extra && std::chrono::steady_clock::now() < deadline) {
        (void)lanes->progress();
        count = 0;
        for (std::size_t i = 0; i < clients.size(); ++i) {
            turned_away[i] = turned_away[i] || closed(clients[i]);
            count += turned_away[i] ? 1 : 0;
        }
    }
    CHECK(count == extra);
    CHECK(lanes->strangers() <= TcpLanes::max_strangers);
    // The oldest went first.
    for (std::size_t i = 0; i < extra; ++i) {
        CHECK(turned_away[i]);
    }
    for (const int fd : clients) {
        ::close(fd);
    }
    // Clients that hang up are forgotten as well.
    const auto again = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (lanes->strangers() > before && std::chrono::steady_clock::now() < again) {
        (void)lanes->progress();
    }
    CHECK(lanes->strangers() == before);
}

TEST_CASE("an endpoint over TCP emulates RMA, over shared memory it does not", "[ucx][path]") {
    // To the own worker: UCX's self transport, or TCP when UCX_TLS=tcp.
    auto rails = pmr::detail::ucx::UcxProcess::instance("test");
    const auto& worker = *rails->rail(0).worker;
    auto endpoint = rails->endpoint(0, worker.address(), false, "test");
    const char* tls = std::getenv("UCX_TLS");
    const bool tcp_only = tls != nullptr && std::string(tls) == "tcp";
    CHECK(endpoint->rma_emulated() == tcp_only);
}

TEST_CASE("every size crosses on the configured path, repeatedly, with the data intact",
          "[ucx][path]") {
    // Inline sizes of the message path, eager ones in one message and in chunks, rendezvous sizes
    // where PMR_UCX_RNDV_BYTES asks for them (the tcp_rndv variant), and the put path under
    // PMR_UCX_PATH=put.
    pmr::Connection c(pmr::Target(MPI_COMM_WORLD, partner(), 10, 10), pmr::Provider::ucx);
    for (const std::size_t count :
         {std::size_t{0}, std::size_t{1}, std::size_t{58}, std::size_t{59}, std::size_t{5000},
          std::size_t{70000}, std::size_t{600000}}) {
        pmr::SendWindow<int> send(c, count);
        pmr::RecvWindow<int> recv(c, count);
        for (int round = 1; round <= 5; ++round) {
            recv.init();
            recv.post();
            send.init();
            for (std::size_t i = 0; i < count; ++i) {
                send[i] = static_cast<int>(i) * 7 + round + world_rank() * 1000;
            }
            send.post();
            send.wait();
            recv.wait();
            REQUIRE(recv.received_bytes() == count * sizeof(int));
            const int peer = partner();
            bool intact = true;
            for (std::size_t i = 0; i < count; ++i) {
                intact = intact && recv[i] == static_cast<int>(i) * 7 + round + peer * 1000;
            }
            INFO("count " << count << " round " << round);
            REQUIRE(intact);
        }
    }
}

TEST_CASE("rounds of a small window run ahead of the receiver on the message path", "[ucx][path]") {
    // rails/protocol.hpp: over emulated RMA a sender whose receive window is small (a notice, or
    // up to 64 KiB sent eagerly) completes up to 15 rounds before its receiver has begun the first,
    // and the receiver then gets every round in order and intact. Elsewhere rounds run in step.
    if (world_size() > 2) {
        return;
    }
    const char* tls = std::getenv("UCX_TLS");
    const char* path = std::getenv("PMR_UCX_PATH");
    const char* rndv = std::getenv("PMR_UCX_RNDV_BYTES");
    const bool messages = tls != nullptr && std::string(tls) == "tcp" &&
                          (path == nullptr || std::string(path) != "put");
    // Unset: none, or from 512 KiB on where ranks outnumber CPUs; these windows are smaller.
    const std::size_t rendezvous = rndv != nullptr ? std::stoul(rndv) : 0;
    const bool one = world_size() == 1;
    const bool sends = one || world_rank() == 0;
    const bool receives = one || world_rank() == 1;
    pmr::Connection c(pmr::Target(MPI_COMM_WORLD, partner(), 12, 12), pmr::Provider::ucx);
    for (const std::size_t count :
         {std::size_t{2}, std::size_t{58}, std::size_t{1024}, std::size_t{16000}}) {
        const std::size_t bytes = count * sizeof(int);
        const bool ahead = messages && (bytes <= 232 || (bytes <= (std::size_t{64} << 10) &&
                                                         (rendezvous == 0 || bytes < rendezvous)));
        const int early = ahead ? static_cast<int>(pmr::detail::rails::ahead_rounds) : 0;
        INFO("count " << count << ", " << early << " rounds ahead");
        std::optional<pmr::SendWindow<int>> send;
        std::optional<pmr::RecvWindow<int>> recv;
        if (sends) {
            send.emplace(c, count);
        }
        if (receives) {
            recv.emplace(c, count);
        }
        const auto value = [](std::size_t i, int round) {
            return static_cast<int>(i * 31) ^ (round << 20);
        };
        const auto start_send = [&](int round) {
            send->init();
            for (std::size_t i = 0; i < count; ++i) {
                (*send)[i] = value(i, round);
            }
            send->post();
        };
        const auto check = [&](int round) {
            INFO("round " << round);
            REQUIRE(recv->received_bytes() == bytes);
            bool intact = true;
            for (std::size_t i = 0; i < count; ++i) {
                intact = intact && (*recv)[i] == value(i, round);
            }
            REQUIRE(intact);
        };
        if (sends) {
            for (int round = 1; round <= early; ++round) {
                start_send(round);
                const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
                bool done = send->test();
                while (!done && std::chrono::steady_clock::now() < until) {
                    done = send->test();
                }
                INFO("round " << round << " of the sender did not complete");
                REQUIRE(done);
            }
        }
        if (!one) {
            MPI_Barrier(MPI_COMM_WORLD);
        }
        if (receives) {
            for (int round = 1; round <= early; ++round) {
                recv->init();
                recv->post();
                recv->wait();
                check(round);
            }
        }
        for (int round = early + 1; round <= early + 5; ++round) {
            if (receives) {
                recv->init();
                recv->post();
            }
            if (sends) {
                start_send(round);
                send->wait();
            }
            if (receives) {
                recv->wait();
                check(round);
            }
        }
        if (!one) {
            MPI_Barrier(MPI_COMM_WORLD);
        }
    }
}

TEST_CASE("a large send completes while its receiver waits in MPI, not in pmr", "[ucx][standby]") {
    // The receiver grants its credit and then sits in MPI_Barrier, which the sender reaches only
    // once its wait() has returned. Over TCP the data of a rendezvous (and of an eager send larger
    // than the socket buffers) moves only while the receiver's UCX progresses: its standby thread
    // must do so while the application is away from pmr, or both ranks hang here.
    if (world_size() != 2) {
        return; // needs a peer process
    }
    pmr::Connection c(pmr::Target(MPI_COMM_WORLD, partner(), 11, 11), pmr::Provider::ucx);
    constexpr std::size_t count = std::size_t{1} << 22; // 16 MiB of int
    const bool sender = world_rank() == 0;
    std::optional<pmr::SendWindow<int>> send;
    std::optional<pmr::RecvWindow<int>> recv;
    if (sender) {
        send.emplace(c, count);
    } else {
        recv.emplace(c, count);
    }
    for (int round = 1; round <= 3; ++round) {
        INFO("round " << round);
        if (sender) {
            send->init();
            for (std::size_t i = 0; i < count; ++i) {
                (*send)[i] = static_cast<int>(i) ^ round;
            }
            send->post();
            send->wait();
            MPI_Barrier(MPI_COMM_WORLD);
        } else {
            recv->init();
            recv->post();
            MPI_Barrier(MPI_COMM_WORLD);
            recv->wait();
            REQUIRE(recv->received_bytes() == count * sizeof(int));
            bool intact = true;
            for (std::size_t i = 0; i < count; ++i) {
                intact = intact && (*recv)[i] == (static_cast<int>(i) ^ round);
            }
            REQUIRE(intact);
        }
    }
    // The sender's send window pairs with the receiver's receive window on this connection; no
    // other window is used.
    MPI_Barrier(MPI_COMM_WORLD);
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
