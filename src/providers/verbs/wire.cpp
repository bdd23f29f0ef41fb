// SPDX-License-Identifier: MIT
#include "providers/verbs/wire.hpp"

#include "base/error.hpp"
#include "rails/settings.hpp"

#include <pmr/settings.hpp>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iterator>

namespace pmr::detail::verbs {
namespace {

constexpr std::uint32_t max_psn = 0xffffff; // queue-pair numbers and PSNs have 24 bits

std::string check_port(const std::string& text) {
    std::string why;
    return parse_port(text, &why) ? std::string() : why;
}

bool is_zero(const std::uint8_t (&gid)[16]) noexcept {
    return std::all_of(std::begin(gid), std::end(gid), [](std::uint8_t b) { return b == 0; });
}

} // namespace

std::optional<Port> parse_port(const std::string& text, std::string* why) {
    const std::size_t colon = text.rfind(':');
    Port port;
    port.device = text.substr(0, colon);
    if (port.device.empty()) {
        *why = "which has no device name";
        return std::nullopt;
    }
    if (colon != std::string::npos) {
        const std::string number = text.substr(colon + 1);
        char* end = nullptr;
        const long n = std::strtol(number.c_str(), &end, 10);
        if (number.empty() || *end != '\0' || n < 1 || n > 255) {
            *why = "whose port is not a number from 1 to 255 (write device:port, e.g. mlx5_0:1)";
            return std::nullopt;
        }
        port.number = static_cast<std::uint8_t>(n);
    }
    return port;
}

VerbsSettings read_verbs_settings() {
    VerbsSettings s;
    const rails::RailSettings rails =
        rails::read_rail_settings("verbs", rails::max_rails, &check_port);
    for (const std::string& device : rails.devices) {
        std::string why;
        s.ports.push_back(*parse_port(device, &why)); // checked by check_port
    }
    s.rails = rails.rails;
    if (const auto gid = settings::integer("PMR_VERBS_GID_INDEX")) {
        s.gid_index = static_cast<int>(*gid);
    }
    return s;
}

// -------------------------------------------------------------------------------------------------
// Hello
// -------------------------------------------------------------------------------------------------

Blob encode_hello(const std::vector<LaneAddress>& lanes) {
    BlobWriter hello;
    hello.put(hello_version).put(static_cast<std::uint32_t>(lanes.size()));
    for (const LaneAddress& lane : lanes) {
        hello.put(lane);
    }
    return hello.take();
}

std::vector<LaneAddress> decode_hello(const Blob& hello, const std::string& where) {
    BlobReader reader(hello, where);
    if (const auto version = reader.get<std::uint32_t>(); version != hello_version) {
        raise<ProviderError>("the peer's verbs provider speaks set-up version " +
                                 std::to_string(version) + ", this one " +
                                 std::to_string(hello_version),
                             where, "Link every rank against the same pmr version.");
    }
    const auto count = reader.get<std::uint32_t>();
    if (count == 0 || count > rails::max_rails) {
        reader.malformed("the verbs hello announces " + std::to_string(count) + " rails");
    }
    std::vector<LaneAddress> lanes;
    for (std::uint32_t i = 0; i < count; ++i) {
        const auto lane = reader.get<LaneAddress>();
        const std::string rail = "verbs rail " + std::to_string(i) + ": ";
        if (lane.qpn == 0 || lane.qpn > max_psn || lane.psn > max_psn) {
            reader.malformed(rail + "queue pair " + std::to_string(lane.qpn) + " with PSN " +
                             std::to_string(lane.psn) + " (both have 24 bits, QP 0 is special)");
        }
        if (lane.mtu < IBV_MTU_256 || lane.mtu > IBV_MTU_4096) {
            reader.malformed(rail + "MTU code " + std::to_string(lane.mtu));
        }
        if (lane.link_layer == IBV_LINK_LAYER_INFINIBAND) {
            if (lane.lid == 0 && lane.global == 0) {
                reader.malformed(rail + "an InfiniBand port without LID");
            }
        } else if (lane.link_layer == IBV_LINK_LAYER_ETHERNET) {
            if (lane.global == 0) {
                reader.malformed(rail + "a RoCE port not addressed by GID");
            }
        } else {
            reader.malformed(rail + "link layer " + std::to_string(lane.link_layer));
        }
        if (lane.global != 0 && is_zero(lane.gid)) {
            reader.malformed(rail + "a zero GID");
        }
        if (lane.ring_slots == 0 || lane.ring_slots > 0x8000 || lane.ring_address == 0 ||
            lane.credit_address == 0) {
            reader.malformed(rail + "a notice ring of " + std::to_string(lane.ring_slots) +
                             " slots at " + std::to_string(lane.ring_address) +
                             ", credit word at " + std::to_string(lane.credit_address));
        }
        lanes.push_back(lane);
    }
    reader.finish();
    return lanes;
}

// -------------------------------------------------------------------------------------------------
// Memory keys
// -------------------------------------------------------------------------------------------------

Blob pack_region(const RemoteRegion& region) {
    return BlobWriter().put(region.address).put(region.bytes).put(region.rkey).take();
}

RemoteRegion unpack_region(const Blob& key, const char* what, const std::string& where) {
    BlobReader reader(key, where);
    RemoteRegion region;
    region.address = reader.get<std::uint64_t>();
    region.bytes = reader.get<std::uint64_t>();
    region.rkey = reader.get<std::uint32_t>();
    reader.finish();
    if (region.address + region.bytes < region.address) {
        reader.malformed(std::string("the key of the ") + what + " spans " +
                         std::to_string(region.bytes) + " B from " +
                         std::to_string(region.address) + ", beyond the address space");
    }
    return region;
}

// -------------------------------------------------------------------------------------------------
// Immediate data
// -------------------------------------------------------------------------------------------------

std::uint32_t encode_immediate(std::uint64_t sequence, std::size_t data_bytes) noexcept {
    return static_cast<std::uint32_t>((sequence & 0xffffU) << 16U) |
           static_cast<std::uint32_t>(data_bytes & 0xffffU);
}

Immediate decode_immediate(std::uint32_t immediate) noexcept {
    Immediate i;
    i.sequence = static_cast<std::uint16_t>(immediate >> 16U);
    i.data_bytes = static_cast<std::uint16_t>(immediate & 0xffffU);
    return i;
}

bool immediate_fits(const Immediate& immediate, std::uint64_t expected_sequence) noexcept {
    return immediate.sequence == static_cast<std::uint16_t>(expected_sequence & 0xffffU) &&
           immediate.data_bytes <= copy_channel::inline_capacity;
}

// -------------------------------------------------------------------------------------------------
// Queue-pair transitions
// -------------------------------------------------------------------------------------------------

Transition init_transition(std::uint8_t port) noexcept {
    Transition t;
    t.attr.qp_state = IBV_QPS_INIT;
    t.attr.pkey_index = 0;
    t.attr.port_num = port;
    // Writes only: nobody reads from or does atomics on pmr's memory.
    t.attr.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
    t.mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
    return t;
}

Transition rtr_transition(const LaneAddress& local, const LaneAddress& remote, std::uint8_t port,
                          int gid_index) noexcept {
    Transition t;
    t.attr.qp_state = IBV_QPS_RTR;
    t.attr.path_mtu = static_cast<ibv_mtu>(std::min(local.mtu, remote.mtu));
    t.attr.dest_qp_num = remote.qpn;
    t.attr.rq_psn = remote.psn;
    t.attr.max_dest_rd_atomic = 0; // no RDMA reads or atomics target this side
    t.attr.min_rnr_timer = min_rnr_timer;
    t.attr.ah_attr.dlid = remote.lid;
    t.attr.ah_attr.sl = 0;
    t.attr.ah_attr.src_path_bits = 0;
    t.attr.ah_attr.port_num = port;
    if (local.global != 0 || remote.global != 0) {
        t.attr.ah_attr.is_global = 1;
        std::memcpy(t.attr.ah_attr.grh.dgid.raw, remote.gid, sizeof remote.gid);
        t.attr.ah_attr.grh.sgid_index = static_cast<std::uint8_t>(gid_index < 0 ? 0 : gid_index);
        t.attr.ah_attr.grh.hop_limit = 64;
        t.attr.ah_attr.grh.traffic_class = 0;
        t.attr.ah_attr.grh.flow_label = 0;
    }
    t.mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
             IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
    return t;
}

Transition rts_transition(const LaneAddress& local) noexcept {
    Transition t;
    t.attr.qp_state = IBV_QPS_RTS;
    t.attr.sq_psn = local.psn;
    t.attr.timeout = ack_timeout;
    t.attr.retry_cnt = retry_count;
    t.attr.rnr_retry = rnr_retry_forever;
    t.attr.max_rd_atomic = 0;
    t.mask = IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
             IBV_QP_MAX_QP_RD_ATOMIC;
    return t;
}

std::string mtu_text(std::uint8_t mtu) {
    return mtu >= IBV_MTU_256 && mtu <= IBV_MTU_4096 ? std::to_string(128U << mtu)
                                                     : "code " + std::to_string(mtu);
}

} // namespace pmr::detail::verbs
