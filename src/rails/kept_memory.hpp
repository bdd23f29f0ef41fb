// SPDX-License-Identifier: MIT
// Registered memory a provider's process state keeps: the library-owned window memory it allocated,
// found again by address, and memory a peer may still write into, kept until exit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

namespace pmr::detail::rails {

/// `M` is the provider's registered memory: `std::byte* data() const`, `std::size_t size() const`.
template <class M>
class KeptMemory {
public:
    /// Keeps library-owned memory until release(data).
    void add(std::shared_ptr<M> memory) {
        const auto address = reinterpret_cast<std::uintptr_t>(memory->data());
        std::lock_guard<std::mutex> lock(mutex_);
        allocations_.emplace(address, std::move(memory));
    }

    /// Lets library-owned memory go (unregistered outside the lock).
    void release(const void* data) noexcept {
        std::shared_ptr<M> memory;
        std::lock_guard<std::mutex> lock(mutex_);
        auto it = allocations_.find(reinterpret_cast<std::uintptr_t>(data));
        if (it != allocations_.end()) {
            memory = std::move(it->second);
            allocations_.erase(it);
        }
    }

    /// The library-owned memory holding [pointer, pointer + bytes), or null.
    std::shared_ptr<M> find(const void* pointer, std::size_t bytes) const {
        const auto address = reinterpret_cast<std::uintptr_t>(pointer);
        std::lock_guard<std::mutex> lock(mutex_);
        auto it = allocations_.upper_bound(address);
        if (it == allocations_.begin()) {
            return nullptr;
        }
        --it;
        const std::size_t offset = address - it->first;
        if (offset > it->second->size() || bytes > it->second->size() - offset) {
            return nullptr;
        }
        return it->second;
    }

    /// Keeps `memory` until this object goes (a peer may still write into it).
    void bury(std::shared_ptr<M> memory) noexcept {
        if (!memory) {
            return;
        }
        std::lock_guard<std::mutex> lock(mutex_);
        try {
            graveyard_.push_back(std::move(memory));
        } catch (...) {
            // Out of memory: leak the registration rather than free memory a peer may still write.
            new std::shared_ptr<M>(std::move(memory)); // NOLINT(cppcoreguidelines-owning-memory)
        }
    }

private:
    mutable std::mutex mutex_;
    std::map<std::uintptr_t, std::shared_ptr<M>> allocations_;
    std::vector<std::shared_ptr<M>> graveyard_;
};

} // namespace pmr::detail::rails
