// SPDX-License-Identifier: MIT
/// @file memory.hpp
/// Memory that every provider can reach by its fastest path: page-aligned, shareable with other
/// processes on the node (a memfd), registered once. Library-owned windows live in it; users can
/// allocate their halo buffers from it to get the same speed with their own buffers.
#pragma once

#include <cstddef>
#include <new>

namespace pmr {

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
