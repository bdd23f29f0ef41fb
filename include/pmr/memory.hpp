// SPDX-License-Identifier: MIT
/// @file memory.hpp
/// Memory that every provider can reach by its fastest path: page-aligned, shareable with other
/// processes on the node (a memfd), registered once. Library-owned windows live in it; users can
/// allocate their halo buffers from it to get the same speed with their own buffers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>

namespace pmr {

/// memcpy for packing halos into windows and out of them, except where the destination lies 1 to
/// 15 bytes after the source modulo 4 KiB: glibc copies 2 KiB and more with `rep movsb`, which AMD
/// Zen processors then take for an overlapping copy and run 15-25 times slower (16 KiB in 4.7 us
/// instead of 0.2-0.3 on the test machine). Such copies go in pieces below glibc's `rep movsb`
/// threshold (2,112 bytes), which use vector moves: about 3 times slower than an aligned copy, not
/// 20. pmr's own copies between buffers of unrelated alignment use it.
inline void copy_bytes(void* destination, const void* source, std::size_t bytes) noexcept {
    constexpr std::size_t piece = 2048;
    const std::uintptr_t distance =
        reinterpret_cast<std::uintptr_t>(destination) - reinterpret_cast<std::uintptr_t>(source);
    if (bytes <= piece || ((distance - 1) & 4095U) >= 15) {
        std::memcpy(destination, source, bytes);
        return;
    }
    auto* to = static_cast<unsigned char*>(destination);
    const auto* from = static_cast<const unsigned char*>(source);
    for (; bytes > piece; bytes -= piece, to += piece, from += piece) {
        std::memcpy(to, from, piece);
    }
    std::memcpy(to, from, bytes);
}

/// Allocates `bytes` of shareable memory, page aligned, zero filled.
/// @throws std::bad_alloc if the memory cannot be had.
void* allocate_bytes(std::size_t bytes);
/// Releases memory from allocate_bytes(); `nullptr` is ignored.
void deallocate_bytes(void* pointer) noexcept;
/// Whether [pointer, pointer + bytes) lies inside one allocation of allocate_bytes(), or inside the
/// memory of a library-owned window (which a connection that can use only one provider takes from
/// that provider, e.g. UCX memory that peers on the node can map).
bool is_pmr_memory(const void* pointer, std::size_t bytes) noexcept;

/// Typed allocate_bytes(); the elements are zero bytes, not constructed objects.
template <class T>
T* allocate(std::size_t count) {
    if (count > static_cast<std::size_t>(-1) / sizeof(T)) {
        throw std::bad_alloc();
    }
    return static_cast<T*>(allocate_bytes(count * sizeof(T)));
}

/// Releases memory from allocate().
template <class T>
void deallocate(T* pointer) noexcept {
    deallocate_bytes(pointer);
}

/// Standard allocator over allocate_bytes(), e.g. `std::vector<double, pmr::Allocator<double>>`.
/// Every allocation is a separate mapping, so use it for a few large buffers, not for many small
/// ones.
template <class T>
struct Allocator {
    using value_type = T;
    Allocator() noexcept = default;
    template <class U>
    Allocator(const Allocator<U>& /*other*/) noexcept {} // NOLINT(google-explicit-constructor)
    T* allocate(std::size_t count) { return pmr::allocate<T>(count); }
    void deallocate(T* pointer, std::size_t /*count*/) noexcept { pmr::deallocate(pointer); }
    template <class U>
    bool operator==(const Allocator<U>& /*other*/) const noexcept {
        return true;
    }
    template <class U>
    bool operator!=(const Allocator<U>& /*other*/) const noexcept {
        return false;
    }
};

} // namespace pmr
