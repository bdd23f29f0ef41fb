// SPDX-License-Identifier: MIT
// The RAII part of a class that wraps a C library's handle (ibv_pd*, ...): owns the handle, moves
// it, and releases it exactly once, so that the wrapper needs no move operations or destructor of
// its own.
#pragma once

#include <cstddef>
#include <tuple>
#include <utility>

namespace pmr::detail {

/// Owns `handle` (null: none) and calls `Release(handle)` when it goes or is replaced. `Keep...`
/// are what the handle depends on (the owner of its parent handle, say a shared_ptr to the
/// protection domain of a memory region): they are held here and let go only after the handle is
/// released, on destruction and on assignment alike.
template <class Handle, auto Release, class... Keep>
class UniqueHandle {
public:
    UniqueHandle() noexcept = default;
    explicit UniqueHandle(Handle handle, Keep... keep) noexcept
        : keep_(std::move(keep)...), handle_(handle) {}
    UniqueHandle(const UniqueHandle&) = delete;
    UniqueHandle& operator=(const UniqueHandle&) = delete;
    UniqueHandle(UniqueHandle&& other) noexcept
        : keep_(std::move(other.keep_)), handle_(std::exchange(other.handle_, nullptr)) {}
    UniqueHandle& operator=(UniqueHandle&& other) noexcept {
        if (this != &other) {
            reset(std::exchange(other.handle_, nullptr));
            keep_ = std::move(other.keep_);
        }
        return *this;
    }
    ~UniqueHandle() { reset(); }

    Handle get() const noexcept { return handle_; }
    explicit operator bool() const noexcept { return handle_ != nullptr; }
    /// Releases the handle held, if any, and takes `handle`.
    void reset(Handle handle = nullptr) noexcept {
        if (handle_ != nullptr) {
            Release(handle_);
        }
        handle_ = handle;
    }
    /// The `I`th of what the handle keeps alive.
    template <std::size_t I>
    const auto& kept() const noexcept {
        return std::get<I>(keep_);
    }

private:
    std::tuple<Keep...> keep_; // first: destroyed after the handle is released
    Handle handle_ = nullptr;
};

} // namespace pmr::detail
