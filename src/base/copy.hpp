// SPDX-License-Identifier: MIT
// The bulk copy into another process's memory (a mapped receive buffer or staging area).
#pragma once

#include <cstddef>

namespace pmr::detail {

/// Copies `bytes` bytes. From settings().stream_threshold bytes on (PMR_STREAM_THRESHOLD, off by
/// default) it uses non-temporal (streaming) stores, which skip reading the destination lines
/// first but leave the data in memory instead of a cache. That makes the copy itself faster once
/// source and destination outgrow the L2 cache (about a quarter here), and the receiver's first
/// read of the halo slower by more: with pmr-bench --buffered, where the receiver unpacks what it
/// got, exchanges of 1-4 MiB were 10-25% slower with streaming. Hence off unless asked for, for
/// receivers that do not touch the data soon. Every store is globally visible when this returns,
/// so a release store that follows publishes the data.
void copy_to_peer(std::byte* destination, const std::byte* source, std::size_t bytes) noexcept;

/// The streaming copy itself, whatever the size (for benchmarks and tests).
void stream_copy(std::byte* destination, const std::byte* source, std::size_t bytes) noexcept;

} // namespace pmr::detail
