// SPDX-License-Identifier: MIT
#include "base/copy.hpp"

#include "base/environment.hpp"

#include <pmr/memory.hpp>

#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace pmr::detail {

void stream_copy(std::byte* destination, const std::byte* source, std::size_t bytes) noexcept {
    if (bytes == 0) {
        return; // either pointer may then be null, which memcpy does not allow
    }
#if defined(__SSE2__)
    constexpr std::size_t vector = sizeof(__m128i);
    constexpr std::size_t block = 4 * vector;
    // Head: up to the first 16-byte boundary of the destination (streaming stores need it).
    const auto misalignment = reinterpret_cast<std::uintptr_t>(destination) % vector; // NOLINT
    std::size_t head = misalignment == 0 ? 0 : vector - misalignment;
    head = head < bytes ? head : bytes;
    std::memcpy(destination, source, head);
    std::size_t done = head;
    for (; done + block <= bytes; done += block) {
        // NOLINTBEGIN(cppcoreguidelines-pro-type-reinterpret-cast)
        const auto* from = reinterpret_cast<const __m128i*>(source + done);
        auto* to = reinterpret_cast<__m128i*>(destination + done);
        // NOLINTEND(cppcoreguidelines-pro-type-reinterpret-cast)
        const __m128i a = _mm_loadu_si128(from);
        const __m128i b = _mm_loadu_si128(from + 1);
        const __m128i c = _mm_loadu_si128(from + 2);
        const __m128i d = _mm_loadu_si128(from + 3);
        _mm_stream_si128(to, a);
        _mm_stream_si128(to + 1, b);
        _mm_stream_si128(to + 2, c);
        _mm_stream_si128(to + 3, d);
    }
    std::memcpy(destination + done, source + done, bytes - done);
    // Streaming stores are weakly ordered: fence them before the caller's release store.
    _mm_sfence();
#else
    std::memcpy(destination, source, bytes);
#endif
}

void copy_to_peer(std::byte* destination, const std::byte* source, std::size_t bytes) noexcept {
    const std::size_t threshold = settings().stream_threshold;
    if (threshold != 0 && bytes >= threshold) {
        stream_copy(destination, source, bytes);
    } else {
        copy_bytes(destination, source, bytes);
    }
}

} // namespace pmr::detail
