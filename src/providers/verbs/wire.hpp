// SPDX-License-Identifier: MIT
// What the verbs provider puts on the wire and into queue-pair attributes, as plain functions that
// make no verbs call: the settings, the provider hello (one lane address per rail), the packed
// memory keys, the immediate data of a notice, and the attributes of each queue-pair state
// transition. Kept apart from the calls so that all of it is tested on machines without an RDMA
// device (tests/test_verbs.cpp).
#pragma once

#include "base/blob.hpp"
#include "rails/protocol.hpp"

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pmr::detail::verbs {

inline constexpr std::uint32_t hello_version = 1;

/// One port of one device: a rail.
struct Port {
    std::string device;
    std::uint8_t number = 1;
    std::string name() const { return device + ":" + std::to_string(number); }
};

/// "mlx5_0:1" or "mlx5_0" (port 1). Nothing, with `why` set, for a malformed name.
std::optional<Port> parse_port(const std::string& text, std::string* why);

/// PMR_VERBS_DEVICES / PMR_DEVICES (one rail per port), PMR_VERBS_RAILS / PMR_RAILS (the first n
/// active ports), PMR_VERBS_GID_INDEX (RoCE: the GID table entry; default: the first RoCE v2
/// entry of the port).
struct VerbsSettings {
    std::vector<Port> ports; ///< empty: the active ports of the devices found, in order
    std::size_t rails = 1;
    int gid_index = -1; ///< -1: chosen per port
};

/// Reads the variables now. @throws ArgumentError for malformed values, naming the variable.
VerbsSettings read_verbs_settings();

/// What one side tells the peer about one rail of a connection: its queue pair and where the
/// peer writes notices and notice credits.
struct LaneAddress {
    std::uint8_t gid[16] = {};
    std::uint64_t ring_address = 0;   ///< the notice ring the peer writes into
    std::uint64_t credit_address = 0; ///< the word the peer writes its notice credits into
    std::uint32_t qpn = 0;
    std::uint32_t psn = 0;
    std::uint32_t ring_rkey = 0;
    std::uint32_t credit_rkey = 0;
    std::uint16_t lid = 0;
    std::uint16_t ring_slots = 0;
    std::uint8_t mtu = 0;        ///< enum ibv_mtu of the port's active MTU
    std::uint8_t link_layer = 0; ///< IBV_LINK_LAYER_INFINIBAND or _ETHERNET
    std::uint8_t global = 0;     ///< addressed by GID (RoCE always, InfiniBand across subnets)
    std::uint8_t reserved = 0;
};

/// The provider hello: version and one address per rail.
Blob encode_hello(const std::vector<LaneAddress>& lanes);
/// Reads and checks a hello. @throws ProviderError naming `where` for anything malformed: another
/// version, no rails or too many, queue-pair numbers or PSNs beyond 24 bits, an unknown MTU or
/// link layer, an InfiniBand port without LID, a RoCE port without GID, an empty notice ring.
std::vector<LaneAddress> decode_hello(const Blob& hello, const std::string& where);

/// A region of registered memory as a peer addresses it.
struct RemoteRegion {
    std::uint64_t address = 0;
    std::uint64_t bytes = 0;
    std::uint32_t rkey = 0;
    /// Whether [address, address + n) lies inside.
    bool covers(std::uint64_t at, std::uint64_t n) const noexcept {
        return at >= address && n <= bytes && at - address <= bytes - n;
    }
};
Blob pack_region(const RemoteRegion& region);
/// @throws ProviderError for a key of the wrong size or an address range that wraps around.
RemoteRegion unpack_region(const Blob& key, const char* what, const std::string& where);

/// One slot of a notice ring: a notice and up to inline_capacity bytes of a small message.
inline constexpr std::size_t notice_slot_bytes = 320;
static_assert(sizeof(rails::Notice) + copy_channel::inline_capacity <= notice_slot_bytes);

/// Immediate data of a notice written into the peer's ring: the low 16 bits of the notice's
/// sequence number on its lane (the ring slot is sequence % ring_slots) and the bytes of message
/// data behind the notice.
std::uint32_t encode_immediate(std::uint64_t sequence, std::size_t data_bytes) noexcept;
struct Immediate {
    std::uint16_t sequence = 0;
    std::uint16_t data_bytes = 0;
};
Immediate decode_immediate(std::uint32_t immediate) noexcept;
/// Whether an immediate is the one expected next on a lane and its length is possible.
bool immediate_fits(const Immediate& immediate, std::uint64_t expected_sequence) noexcept;

/// Attributes and mask of one ibv_modify_qp call.
struct Transition {
    ibv_qp_attr attr{};
    int mask = 0;
};
/// Reliability of the queue pairs: ACK timeout 4.096 us * 2^18 (about 1.07 s) and 7 retries, so a
/// peer that has not brought its side to RTR yet (it has not read this side's hello) has about
/// 8.6 s before a write fails with IBV_WC_RETRY_EXC_ERR; receiver-not-ready retries forever.
inline constexpr std::uint8_t ack_timeout = 18;
inline constexpr std::uint8_t retry_count = 7;
inline constexpr std::uint8_t rnr_retry_forever = 7;
inline constexpr std::uint8_t min_rnr_timer = 12; // 0.64 ms

Transition init_transition(std::uint8_t port) noexcept;
/// `gid_index`: the local GID table entry when the path is global.
Transition rtr_transition(const LaneAddress& local, const LaneAddress& remote, std::uint8_t port,
                          int gid_index) noexcept;
Transition rts_transition(const LaneAddress& local) noexcept;

/// Text of an enum ibv_mtu value ("4096"), for messages.
std::string mtu_text(std::uint8_t mtu);

} // namespace pmr::detail::verbs
