// SPDX-License-Identifier: MIT
// The bulk copy into another process's memory (a mapped receive buffer or staging area).
#pragma once

#include <cstddef>

namespace pmr::detail {

/// Copies `bytes` bytes. From settings().stream_threshold bytes on it uses non-temporal
/// (streaming) stores: once source and destination no longer fit in this core's L2 cache, a normal
/// copy first reads every destination line it overwrites, and skipping that read makes large
/// copies about a quarter faster here. Smaller copies use memcpy, whose result stays in cache.
/// Every store is globally visible when this returns, so a release store that follows publishes
/// the data.
void copy_to_peer(std::byte* destination, const std::byte* source, std::size_t bytes) noexcept;

/// The streaming copy itself, whatever the size (for benchmarks and tests).
void stream_copy(std::byte* destination, const std::byte* source, std::size_t bytes) noexcept;

/// The default stream threshold: half of this core's L2 cache (1 MiB when unknown).
std::size_t default_stream_threshold() noexcept;

} // namespace pmr::detail
