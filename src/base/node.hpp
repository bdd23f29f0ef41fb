// SPDX-License-Identifier: MIT
// Which operating-system instance this process runs on: processes with the same node name can
// share memory and reach each other by cross-memory attach.
#pragma once

#include <cstdint>
#include <string>

namespace pmr::detail {

/// "<hostname>/<boot id>", computed once.
const std::string& node_name();
/// A 64-bit hash of node_name() (FNV-1a), for compact node maps.
std::uint64_t node_key();
/// The hash node_key() uses, of any node name.
std::uint64_t hash_node_name(const std::string& name) noexcept;

} // namespace pmr::detail
