// SPDX-License-Identifier: MIT
/// @file pattern.hpp
/// Data patterns for --verify: every message of every round carries a pattern derived from the
/// round, the sender and the channel (direction) it was sent on, so a stale, truncated, misrouted
/// or swapped message is told apart from the expected one.
#pragma once

#include <cstddef>
#include <cstdint>

namespace pmr_bench {

/// Seed of the message `sender` sends in `round` on `channel`.
std::uint64_t pattern_seed(std::uint64_t round, int sender, int channel) noexcept;

/// Writes the pattern of `seed` into [data, data + bytes). Word k holds seed + k * odd constant, so
/// patterns of different seeds differ in every word.
void fill_pattern(void* data, std::size_t bytes, std::uint64_t seed) noexcept;

/// Offset of the first byte that is not the pattern of `seed`, or `bytes` if all match.
std::size_t find_mismatch(const void* data, std::size_t bytes, std::uint64_t seed) noexcept;

} // namespace pmr_bench
