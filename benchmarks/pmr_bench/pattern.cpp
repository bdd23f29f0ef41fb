// SPDX-License-Identifier: MIT
#include "pattern.hpp"

#include <cstring>

namespace pmr_bench {

namespace {
constexpr std::uint64_t word_step = 0x9e3779b97f4a7c15ULL;

std::uint64_t mix(std::uint64_t x) noexcept {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}
} // namespace

std::uint64_t pattern_seed(std::uint64_t round, int sender, int channel) noexcept {
    auto who = (static_cast<std::uint64_t>(static_cast<std::uint32_t>(sender)) << 16) ^
               static_cast<std::uint64_t>(static_cast<std::uint16_t>(channel));
    return mix(mix(round + word_step) ^ who);
}

void fill_pattern(void* data, std::size_t bytes, std::uint64_t seed) noexcept {
    auto* out = static_cast<unsigned char*>(data);
    std::size_t words = bytes / 8;
    std::uint64_t value = seed;
    for (std::size_t k = 0; k < words; ++k, value += word_step) {
        std::memcpy(out + 8 * k, &value, 8);
    }
    if (bytes % 8 != 0) {
        std::memcpy(out + 8 * words, &value, bytes % 8);
    }
}

std::size_t find_mismatch(const void* data, std::size_t bytes, std::uint64_t seed) noexcept {
    const auto* in = static_cast<const unsigned char*>(data);
    std::size_t words = bytes / 8;
    std::uint64_t value = seed;
    for (std::size_t k = 0; k < words; ++k, value += word_step) {
        if (std::memcmp(in + 8 * k, &value, 8) != 0) {
            for (std::size_t b = 0; b < 8; ++b) {
                if (in[8 * k + b] != reinterpret_cast<const unsigned char*>(&value)[b]) {
                    return 8 * k + b;
                }
            }
        }
    }
    for (std::size_t b = 0; b < bytes % 8; ++b) {
        if (in[8 * words + b] != reinterpret_cast<const unsigned char*>(&value)[b]) {
            return 8 * words + b;
        }
    }
    return bytes;
}

} // namespace pmr_bench
