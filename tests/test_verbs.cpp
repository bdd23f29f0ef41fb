// SPDX-License-Identifier: MIT
// The verbs provider. Without an RDMA device (our CI machines) this tests everything that does not
// need one: the settings, the hello and the memory keys against malformed input, the immediate
// data, the queue-pair transition attributes, the error messages, and that a host without a device
// keeps verbs out of the default choice and refuses PMR_PROVIDER=verbs with a clear message. The
// exchanges over real queue pairs run only where /sys/class/infiniband has an active port; without
// one they say so on stderr and check nothing.
#include "support.hpp"

#include "providers/verbs/native.hpp"
#include "providers/verbs/transport.hpp"
#include "providers/verbs/verbs.hpp"
#include "providers/verbs/wire.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

using namespace pmr_test;
namespace verbs = pmr::detail::verbs;

namespace {

bool has_device() {
    static const bool present = !verbs::active_ports().empty();
    return present;
}

/// Says once per test case why it checks nothing here.
bool skip_without_device(const char* what) {
    if (has_device()) {
        return false;
    }
    if (world_rank() == 0) {
        std::cerr << "test_verbs: SKIPPED '" << what
                  << "': no RDMA device with an active port on this host (libibverbs lists "
                     "none)\n";
    }
    return true;
}

verbs::LaneAddress infiniband_lane() {
    verbs::LaneAddress a;
    a.qpn = 0x1234;
    a.psn = 0xabcdef;
    a.lid = 7;
    a.mtu = IBV_MTU_4096;
    a.link_layer = IBV_LINK_LAYER_INFINIBAND;
    a.ring_address = 0x10000;
    a.ring_rkey = 99;
    a.ring_slots = verbs::ring_slots;
    a.credit_address = 0x20000;
    a.credit_rkey = 98;
    return a;
}

verbs::LaneAddress roce_lane() {
    verbs::LaneAddress a = infiniband_lane();
    a.link_layer = IBV_LINK_LAYER_ETHERNET;
    a.lid = 0;
    a.global = 1;
    a.mtu = IBV_MTU_1024;
    for (std::size_t i = 0; i < sizeof a.gid; ++i) {
        a.gid[i] = static_cast<std::uint8_t>(0xf0 + i);
    }
    return a;
}

std::string decode_error(const pmr::detail::Blob& hello) {
    return message_of<pmr::ProviderError>([&] { verbs::decode_hello(hello, "test hello"); });
}

/// A hello whose one lane `change` altered.
template <class Change>
std::string decode_error_of(Change&& change) {
    verbs::LaneAddress lane = infiniband_lane();
    change(lane);
    return decode_error(verbs::encode_hello({lane}));
}

bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

} // namespace

// -------------------------------------------------------------------------------------------------
// Without a device
// -------------------------------------------------------------------------------------------------

TEST_CASE("verbs ports are named device:port", "[verbs][settings]") {
    std::string why;
    auto p = verbs::parse_port("mlx5_0:1", &why);
    REQUIRE(p);
    CHECK(p->device == "mlx5_0");
    CHECK(p->number == 1);
    CHECK(p->name() == "mlx5_0:1");
    p = verbs::parse_port("rxe0", &why);
    REQUIRE(p);
    CHECK(p->name() == "rxe0:1");
    p = verbs::parse_port("mlx5_3:2", &why);
    REQUIRE(p);
    CHECK(p->number == 2);
    for (const char* bad : {":1", "mlx5_0:", "mlx5_0:0", "mlx5_0:256", "mlx5_0:x", "mlx5_0:1x"}) {
        INFO(bad);
        why.clear();
        CHECK_FALSE(verbs::parse_port(bad, &why));
        CHECK_FALSE(why.empty());
    }
}

TEST_CASE("PMR_VERBS_* variables are read and checked", "[verbs][settings]") {
    ScopedEnvironment env;
    env.set("PMR_DEVICES", nullptr);
    env.set("PMR_RAILS", nullptr);
    env.set("PMR_VERBS_RAILS", nullptr);
    env.set("PMR_VERBS_GID_INDEX", nullptr);
    env.set("PMR_VERBS_DEVICES", "mlx5_0:1, mlx5_1:2");
    auto s = verbs::read_verbs_settings();
    REQUIRE(s.ports.size() == 2);
    CHECK(s.rails == 2);
    CHECK(s.ports[0].name() == "mlx5_0:1");
    CHECK(s.ports[1].name() == "mlx5_1:2");
    CHECK(s.gid_index == -1);

    // The generic variable, when the provider's own is unset.
    env.set("PMR_VERBS_DEVICES", nullptr);
    env.set("PMR_DEVICES", "bnxt_re0");
    s = verbs::read_verbs_settings();
    REQUIRE(s.ports.size() == 1);
    CHECK(s.ports[0].name() == "bnxt_re0:1");
    env.set("PMR_DEVICES", nullptr);

    env.set("PMR_VERBS_RAILS", "3");
    s = verbs::read_verbs_settings();
    CHECK(s.ports.empty());
    CHECK(s.rails == 3);
    env.set("PMR_VERBS_RAILS", nullptr);

    env.set("PMR_VERBS_DEVICES", "mlx5_0:0");
    std::string m = message_of<pmr::ArgumentError>(verbs::read_verbs_settings);
    CHECK(contains(m, "PMR_VERBS_DEVICES"));
    CHECK(contains(m, "mlx5_0:0"));
    env.set("PMR_VERBS_DEVICES", "mlx5_0:1,,mlx5_1:1");
    CHECK(contains(message_of<pmr::ArgumentError>(verbs::read_verbs_settings), "empty entry"));
    env.set("PMR_VERBS_DEVICES", nullptr);

    env.set("PMR_VERBS_GID_INDEX", "3");
    CHECK(verbs::read_verbs_settings().gid_index == 3);
    for (const char* bad : {"-1", "256", "x", "3x"}) {
        INFO(bad);
        env.set("PMR_VERBS_GID_INDEX", bad);
        CHECK(contains(message_of<pmr::ArgumentError>(verbs::read_verbs_settings),
                       "PMR_VERBS_GID_INDEX"));
    }
}

TEST_CASE("the verbs hello survives the trip and refuses malformed input", "[verbs][hello]") {
    const std::vector<verbs::LaneAddress> lanes{infiniband_lane(), roce_lane()};
    const auto decoded = verbs::decode_hello(verbs::encode_hello(lanes), "test");
    REQUIRE(decoded.size() == 2);
    CHECK(std::memcmp(&decoded[0], &lanes[0], sizeof lanes[0]) == 0);
    CHECK(std::memcmp(&decoded[1], &lanes[1], sizeof lanes[1]) == 0);

    const pmr::detail::Blob good = verbs::encode_hello(lanes);
    SECTION("wrong length") {
        pmr::detail::Blob shorter(good.begin(), good.end() - 1);
        CHECK(contains(decode_error(shorter), "early"));
        pmr::detail::Blob longer = good;
        longer.push_back(std::byte{0});
        CHECK(contains(decode_error(longer), "trailing"));
        CHECK(contains(decode_error({}), "early"));
    }
    SECTION("another version") {
        pmr::detail::Blob other = good;
        other[0] = std::byte{9};
        const std::string m = decode_error(other);
        CHECK(contains(m, "version 9"));
        CHECK(contains(m, "test hello"));
    }
    SECTION("rail counts") {
        CHECK(contains(decode_error(verbs::encode_hello({})), "0 rails"));
        std::vector<verbs::LaneAddress> many(pmr::detail::rails::max_rails + 1, infiniband_lane());
        CHECK(contains(decode_error(verbs::encode_hello(many)), "17 rails"));
    }
    SECTION("fields out of range") {
        CHECK(contains(decode_error_of([](auto& l) { l.qpn = 0; }), "queue pair 0"));
        CHECK(contains(decode_error_of([](auto& l) { l.qpn = 0x1000000; }), "24 bits"));
        CHECK(contains(decode_error_of([](auto& l) { l.psn = 0x1000000; }), "24 bits"));
        CHECK(contains(decode_error_of([](auto& l) { l.mtu = 0; }), "MTU code 0"));
        CHECK(contains(decode_error_of([](auto& l) { l.mtu = 6; }), "MTU code 6"));
        CHECK(contains(decode_error_of([](auto& l) { l.lid = 0; }), "without LID"));
        CHECK(contains(decode_error_of([](auto& l) { l.link_layer = 3; }), "link layer 3"));
        CHECK(contains(decode_error_of([](auto& l) { l.ring_slots = 0; }), "notice ring"));
        CHECK(contains(decode_error_of([](auto& l) { l.ring_address = 0; }), "notice ring"));
        CHECK(contains(decode_error_of([](auto& l) { l.credit_address = 0; }), "credit word"));
        CHECK(contains(decode_error_of([](auto& l) { l.global = 1; }), "zero GID"));
        CHECK(contains(decode_error_of([](auto& l) {
                           l = roce_lane();
                           l.global = 0;
                       }),
                       "not addressed by GID"));
    }
    SECTION("the rail is named") {
        auto second_bad = lanes;
        second_bad[1].qpn = 0;
        CHECK(contains(decode_error(verbs::encode_hello(second_bad)), "verbs rail 1"));
    }
}

TEST_CASE("verbs memory keys are checked", "[verbs][keys]") {
    const verbs::RemoteRegion region{0x1000, 256, 42};
    const auto back = verbs::unpack_region(verbs::pack_region(region), "inbox", "test");
    CHECK(back.address == 0x1000);
    CHECK(back.bytes == 256);
    CHECK(back.rkey == 42);
    CHECK(region.covers(0x1000, 256));
    CHECK(region.covers(0x10ff, 1));
    CHECK(region.covers(0x1100, 0));
    CHECK_FALSE(region.covers(0x10ff, 2));
    CHECK_FALSE(region.covers(0xfff, 1));
    CHECK_FALSE(region.covers(0x1001, ~std::uint64_t{0}));
    pmr::detail::Blob key = verbs::pack_region(region);
    key.pop_back();
    CHECK(contains(
        message_of<pmr::ProviderError>([&] { verbs::unpack_region(key, "inbox", "test"); }),
        "early"));
    const verbs::RemoteRegion wrapping{~std::uint64_t{0} - 10, 100, 1};
    CHECK(contains(message_of<pmr::ProviderError>([&] {
                       verbs::unpack_region(verbs::pack_region(wrapping), "receive buffer", "test");
                   }),
                   "receive buffer"));
}

TEST_CASE("the immediate data of a notice carries its sequence and length", "[verbs][immediate]") {
    for (std::uint64_t sequence :
         {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{65535}, std::uint64_t{65536},
          std::uint64_t{65537}, std::uint64_t{1} << 40U}) {
        for (std::size_t bytes : {std::size_t{0}, std::size_t{1}, std::size_t{232}}) {
            INFO(sequence << " " << bytes);
            const auto i = verbs::decode_immediate(verbs::encode_immediate(sequence, bytes));
            CHECK(i.sequence == (sequence & 0xffffU));
            CHECK(i.data_bytes == bytes);
            CHECK(verbs::immediate_fits(i, sequence));
            CHECK_FALSE(verbs::immediate_fits(i, sequence + 1));
            CHECK_FALSE(verbs::immediate_fits(i, sequence - 1));
        }
    }
    // Sequences wrap at 16 bits: 65536 notices later the same immediate is expected again.
    CHECK(verbs::encode_immediate(3, 5) == verbs::encode_immediate(65539, 5));
    CHECK_FALSE(verbs::immediate_fits(verbs::decode_immediate(verbs::encode_immediate(0, 233)), 0));
}

TEST_CASE("queue pairs go through INIT, RTR and RTS with these attributes", "[verbs][qp]") {
    const auto init = verbs::init_transition(2);
    CHECK(init.attr.qp_state == IBV_QPS_INIT);
    CHECK(init.attr.port_num == 2);
    CHECK(init.attr.qp_access_flags == IBV_ACCESS_REMOTE_WRITE);
    CHECK(init.mask == (IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS));

    verbs::LaneAddress local = infiniband_lane();
    verbs::LaneAddress remote = infiniband_lane();
    remote.qpn = 0x777;
    remote.psn = 0x123;
    remote.lid = 9;
    remote.mtu = IBV_MTU_2048;
    auto rtr = verbs::rtr_transition(local, remote, 1, -1);
    CHECK(rtr.attr.qp_state == IBV_QPS_RTR);
    CHECK(rtr.attr.dest_qp_num == 0x777);
    CHECK(rtr.attr.rq_psn == 0x123);
    CHECK(rtr.attr.path_mtu == IBV_MTU_2048); // the smaller of the two
    CHECK(rtr.attr.ah_attr.dlid == 9);
    CHECK(rtr.attr.ah_attr.port_num == 1);
    CHECK(rtr.attr.ah_attr.is_global == 0);
    CHECK(rtr.attr.max_dest_rd_atomic == 0);
    CHECK((rtr.mask & IBV_QP_AV) != 0);
    CHECK((rtr.mask & IBV_QP_DEST_QPN) != 0);
    CHECK((rtr.mask & IBV_QP_RQ_PSN) != 0);
    CHECK((rtr.mask & IBV_QP_PATH_MTU) != 0);
    CHECK((rtr.mask & IBV_QP_MIN_RNR_TIMER) != 0);

    const verbs::LaneAddress roce_local = roce_lane();
    verbs::LaneAddress roce_remote = roce_lane();
    roce_remote.gid[15] = 0x01;
    rtr = verbs::rtr_transition(roce_local, roce_remote, 1, 3);
    CHECK(rtr.attr.ah_attr.is_global == 1);
    CHECK(rtr.attr.ah_attr.grh.sgid_index == 3);
    CHECK(std::memcmp(rtr.attr.ah_attr.grh.dgid.raw, roce_remote.gid, 16) == 0);
    CHECK(rtr.attr.ah_attr.grh.hop_limit > 0);
    CHECK(rtr.attr.path_mtu == IBV_MTU_1024);

    const auto rts = verbs::rts_transition(local);
    CHECK(rts.attr.qp_state == IBV_QPS_RTS);
    CHECK(rts.attr.sq_psn == local.psn);
    CHECK(rts.attr.timeout == verbs::ack_timeout);
    CHECK(rts.attr.retry_cnt == 7);
    CHECK(rts.attr.rnr_retry == 7); // receiver not ready: retry forever
    CHECK(rts.mask == (IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                       IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC));
    CHECK(verbs::mtu_text(IBV_MTU_4096) == "4096");
    CHECK(verbs::mtu_text(IBV_MTU_256) == "256");
}

TEST_CASE("failed verbs calls and completions become pmr errors naming call, device and cause",
          "[verbs][errors]") {
    std::string m = message_of<pmr::ProviderError>(
        [] { verbs::raise_call("ibv_create_qp", "mlx5_0:1", ENOMEM, "rank 0 -> peer 1"); });
    CHECK(contains(m, "ibv_create_qp on mlx5_0:1 failed"));
    CHECK(contains(m, std::strerror(ENOMEM)));
    CHECK(contains(m, "rank 0 -> peer 1"));
    CHECK_NOTHROW(verbs::check_call(0, "ibv_modify_qp", "mlx5_0:1", "w"));
    m = message_of<pmr::ProviderError>(
        [] { verbs::check_call(EINVAL, "ibv_modify_qp (to RTR)", "mlx5_0:1", "w", "Do this."); });
    CHECK(contains(m, "ibv_modify_qp (to RTR) on mlx5_0:1"));
    CHECK(contains(m, std::strerror(EINVAL)));
    CHECK(contains(m, "Do this."));
    errno = EAGAIN;
    m = message_of<pmr::ProviderError>([] { verbs::check_call(-1, "ibv_post_send", "x:1", "w"); });
    CHECK(contains(m, std::strerror(EAGAIN)));

    CHECK(verbs::is_peer_failure(IBV_WC_RETRY_EXC_ERR));
    CHECK(verbs::is_peer_failure(IBV_WC_WR_FLUSH_ERR));
    CHECK_FALSE(verbs::is_peer_failure(IBV_WC_REM_ACCESS_ERR));
    CHECK_FALSE(verbs::is_peer_failure(IBV_WC_LOC_LEN_ERR));
    m = message_of<pmr::PeerLost>(
        [] { verbs::raise_completion(IBV_WC_RETRY_EXC_ERR, "RDMA write", "mlx5_0:1", "w"); });
    CHECK(contains(m, "RDMA write on mlx5_0:1 failed"));
    CHECK(contains(m, ibv_wc_status_str(IBV_WC_RETRY_EXC_ERR)));
    CHECK(contains(m, "status 12"));
    m = message_of<pmr::ProviderError>(
        [] { verbs::raise_completion(IBV_WC_REM_ACCESS_ERR, "RDMA write", "mlx5_0:1", "w"); });
    CHECK(contains(m, ibv_wc_status_str(IBV_WC_REM_ACCESS_ERR)));
    CHECK(contains(m, "pmr bug"));
}

TEST_CASE("the verbs transport and provider conform to their interfaces", "[verbs]") {
    using Transport = verbs::BasicTransport<pmr::detail::Verbs::Connection>;
    STATIC_REQUIRE(pmr::detail::rails::transport_conforms<Transport>());
    STATIC_REQUIRE(pmr::detail::provider_conforms<pmr::detail::Verbs>());
    CHECK(pmr::is_compiled(pmr::Provider::verbs));
    CHECK(pmr::to_string(pmr::Provider::verbs) == "verbs");
}

TEST_CASE("without a device verbs is never chosen and cannot be forced", "[verbs][no-device]") {
    start_together();
    if (has_device()) {
        if (world_rank() == 0) {
            std::cerr << "test_verbs: SKIPPED 'without a device ...': this host has RDMA ports\n";
        }
        return;
    }
    pmr::detail::PeerInfo remote;
    remote.node = "elsewhere";
    CHECK_FALSE(pmr::detail::Verbs::reaches(remote));
    remote.same_node = true;
    CHECK_FALSE(pmr::detail::Verbs::reaches(remote));
    CHECK_FALSE(verbs::VerbsProcess::existing());

    const std::string m = message_of<pmr::ProviderError>([] {
        pmr::Connection c(pmr::Target(MPI_COMM_WORLD, world_rank(), 31, 31), pmr::Provider::verbs);
    });
    CHECK(contains(m, "no RDMA device"));
    CHECK(contains(m, "PMR_PROVIDER=ucx"));

    // The default choice goes on working as before.
    pmr::Connection c(pmr::Target(MPI_COMM_WORLD, (world_rank() + 1) % world_size(), 32, 32));
    pmr::SendWindow<int> send(c, 4);
    pmr::RecvWindow<int> recv(c, 4);
    recv.init();
    send.init();
    send[0] = world_rank();
    send.post();
    recv.post();
    send.wait();
    recv.wait();
    CHECK(recv[0] == (world_rank() + world_size() - 1) % world_size());
    CHECK(c.provider() != pmr::Provider::verbs);
}

// -------------------------------------------------------------------------------------------------
// With a device
// -------------------------------------------------------------------------------------------------

TEST_CASE("verbs rounds of every size over a forced verbs connection", "[verbs][device]") {
    start_together();
    if (skip_without_device("verbs rounds of every size")) {
        return;
    }
    const int peer = world_size() == 2 ? 1 - world_rank() : world_rank();
    pmr::Connection c(pmr::Target(MPI_COMM_WORLD, peer, 41, 41), pmr::Provider::verbs);
    for (std::size_t count : {std::size_t{1}, std::size_t{29}, std::size_t{30}, std::size_t{1000},
                              std::size_t{1} << 18U}) {
        INFO(count << " doubles");
        pmr::SendWindow<double> send(c, count);
        pmr::RecvWindow<double> recv(c, count);
        for (std::uint64_t round = 0; round < 300; ++round) {
            recv.init();
            send.init();
            fill_pattern(send.data(), send.bytes(), seed_of({round, count}));
            send.post();
            recv.post();
            send.wait();
            recv.wait();
            REQUIRE(check_pattern(recv.data(), 0, recv.bytes(), seed_of({round, count}),
                                  "verbs round"));
        }
    }
    CHECK(c.provider() == pmr::Provider::verbs);
}

#ifdef PMR_TEST_VERBS_LOOPBACK
// -------------------------------------------------------------------------------------------------
// On the in-process device of verbs_loopback.cpp only
// -------------------------------------------------------------------------------------------------

void verbs_loopback_fail_writes_after(long writes);

TEST_CASE("verbs ports that do not exist are refused by name", "[verbs][loopback]") {
    verbs::VerbsSettings settings;
    settings.ports = {{"nope0", 1}};
    std::string m = message_of<pmr::ProviderError>([&] { verbs::VerbsProcess(settings, "test"); });
    CHECK(contains(m, "no RDMA device named 'nope0'"));
    settings.ports = {{"loop0", 3}};
    m = message_of<pmr::ProviderError>([&] { verbs::VerbsProcess(settings, "test"); });
    CHECK(contains(m, "ibv_query_port on loop0:3 failed"));
    settings.ports.clear();
    settings.rails = 3; // the device has two ports
    m = message_of<pmr::ArgumentError>([&] { verbs::VerbsProcess(settings, "test"); });
    CHECK(contains(m, "3 verbs rails asked for, 2 active ports found"));
    settings.rails = 2;
    const verbs::VerbsProcess two(settings, "test");
    REQUIRE(two.size() == 2);
    CHECK(two.rail(1).name == "loop0:2");
}

TEST_CASE("notice sequences wrap around and notice credits keep flowing", "[verbs][loopback]") {
    // 70000 rounds of a small message: 70000 notices on the lane, beyond the 16 bits of the
    // immediate's sequence and a thousand times round the 64-slot ring.
    pmr::Connection c(pmr::Target(MPI_COMM_WORLD, world_rank(), 51, 51), pmr::Provider::verbs);
    pmr::SendWindow<std::uint64_t> send(c, 2);
    pmr::RecvWindow<std::uint64_t> recv(c, 2);
    for (std::uint64_t round = 0; round < 70000; ++round) {
        recv.init();
        send.init();
        send[0] = round;
        send[1] = ~round;
        send.post();
        recv.post();
        send.wait();
        recv.wait();
        if (recv[0] != round || recv[1] != ~round) {
            FAIL("round " << round << " delivered " << recv[0] << ", " << recv[1]);
        }
    }
}

TEST_CASE("several windows of one connection interleave their rounds", "[verbs][loopback]") {
    pmr::Connection c(pmr::Target(MPI_COMM_WORLD, world_rank(), 52, 52), pmr::Provider::verbs);
    std::vector<std::unique_ptr<pmr::SendWindow<char>>> sends;
    std::vector<std::unique_ptr<pmr::RecvWindow<char>>> recvs;
    const std::size_t sizes[] = {1, 232, 233, 5000, 300000};
    for (std::size_t bytes : sizes) {
        sends.push_back(std::make_unique<pmr::SendWindow<char>>(c, bytes));
        recvs.push_back(std::make_unique<pmr::RecvWindow<char>>(c, bytes));
    }
    for (std::uint64_t round = 0; round < 50; ++round) {
        for (std::size_t i = 0; i < sends.size(); ++i) {
            recvs[i]->init();
            sends[i]->init();
            fill_pattern(sends[i]->data(), sends[i]->bytes(), seed_of({round, i}));
            sends[i]->post();
            recvs[i]->post();
        }
        for (std::size_t i = sends.size(); i-- > 0;) {
            sends[i]->wait();
            recvs[i]->wait();
            REQUIRE(check_pattern(recvs[i]->data(), 0, recvs[i]->bytes(), seed_of({round, i}),
                                  "window " + std::to_string(i)));
        }
    }
}

TEST_CASE("a write that fails as if the peer vanished ends the waits with PeerLost",
          "[verbs][loopback]") {
    pmr::Connection c(pmr::Target(MPI_COMM_WORLD, world_rank(), 53, 53), pmr::Provider::verbs);
    pmr::SendWindow<double> send(c, 1000);
    pmr::RecvWindow<double> recv(c, 1000);
    recv.init();
    send.init();
    send.post();
    recv.post();
    send.wait();
    recv.wait();
    verbs_loopback_fail_writes_after(0); // the next write: the credit of the next round
    recv.init();
    send.init();
    send.post();
    recv.post();
    // Both waits name the failed completion and the port.
    for (const std::string& m : {message_of<pmr::PeerLost>([&] { send.wait(); }),
                                 message_of<pmr::PeerLost>([&] { recv.wait(); })}) {
        CHECK(contains(m, ibv_wc_status_str(IBV_WC_RETRY_EXC_ERR)));
        CHECK(contains(m, "loop0:1"));
    }
}
#endif
