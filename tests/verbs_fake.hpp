// SPDX-License-Identifier: MIT
// What the two fake RDMA devices of the verbs tests have in common (verbs_loopback.cpp: within one
// process; verbs_shared.cpp: between the processes of a launch): one device of two InfiniBand
// ports, the rules of posting a send, and the attributes each queue-pair transition needs.
// verbs_fake.cpp defines the libibverbs functions that do not depend on where the state lives.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace verbs_fake {

constexpr std::uint32_t max_inline = 256;
constexpr std::uint8_t ports = 2;
constexpr int max_cqe = 4096;

inline std::uint16_t lid_of(std::uint8_t port) {
    return static_cast<std::uint16_t>(0x10 + port);
}

/// A posted send, with its inline bytes copied at posting time as a device does.
struct Operation {
    ibv_send_wr request{};
    std::vector<std::byte> inline_data;
    std::vector<ibv_sge> gather;
    bool signalled = false;
};

/// Reads `wr` into `op`: 0, or EINVAL for inline data beyond max_inline.
int read_request(const ibv_send_wr& wr, Operation& op);

/// Whether `mask` has every attribute the transition to `state` needs (INIT, RTR, RTS; false for
/// any other state).
bool transition_complete(ibv_qp_state state, int mask);

/// Whether memory may be registered with `access` (the provider always asks for local and remote
/// write).
bool access_supported(std::size_t bytes, int access);

/// A list of the one device, as ibv_get_device_list returns it (freed by free()).
ibv_device** device_list(ibv_device& device, const char* name, int* count);

} // namespace verbs_fake
