// SPDX-License-Identifier: MIT
// The credit cells of a rails provider's process (put_path.hpp: acquire_cell, cell_key): carved
// out of chunks of registered memory, which the pool keeps until exit, and handed out through the
// process's Registry.
#pragma once

#include "rails/registry.hpp"

#include "base/copy_channel.hpp"
#include "base/error.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace pmr::detail::rails {

/// `Chunk` is the provider's registered memory (a std::shared_ptr to it, or a value), whose cells
/// start at chunk_data(chunk).
template <class Chunk>
class CellPool {
public:
    /// Chunks of `cells_per_chunk` cells, added to `registry`.
    CellPool(Registry& registry, std::size_t cells_per_chunk) noexcept
        : registry_(registry), cells_per_chunk_(cells_per_chunk) {}

    /// A free cell, or else one of a new chunk that `make(bytes)` registers (called without the
    /// pool's lock: registering may run the provider's progress, whose handlers take locks).
    /// @throws what `make` throws.
    template <class Make>
    CreditCell acquire(Make&& make, const std::string& where) {
        if (auto cell = registry_.take_cell()) {
            return *cell;
        }
        Chunk chunk = std::forward<Make>(make)(cells_per_chunk_ * copy_channel::cache_line);
        std::byte* memory = chunk_data(chunk);
        std::uint32_t index = 0;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            index = static_cast<std::uint32_t>(chunks_.size());
            chunks_.push_back(std::move(chunk));
        }
        registry_.add_chunk(memory, reinterpret_cast<std::uintptr_t>(memory), cells_per_chunk_,
                            index);
        if (auto cell = registry_.take_cell()) {
            return *cell;
        }
        raise<ProviderError>("no credit cell after adding a chunk", where);
    }

    /// What `key(chunk)` says of the chunk holding `cell` (its key for peers), under the lock.
    template <class Key>
    auto key(const CreditCell& cell, Key&& key) const {
        std::lock_guard<std::mutex> lock(mutex_);
        return std::forward<Key>(key)(chunks_[cell.chunk]);
    }

private:
    template <class M>
    static std::byte* chunk_data(std::shared_ptr<M>& chunk) noexcept {
        return chunk->data();
    }
    template <class C>
    static std::byte* chunk_data(C& chunk) noexcept {
        return chunk.data();
    }

    Registry& registry_;
    std::size_t cells_per_chunk_;
    mutable std::mutex mutex_; // chunks_
    std::vector<Chunk> chunks_;
};

} // namespace pmr::detail::rails
