// SPDX-License-Identifier: MIT
// Byte strings for set-up messages, and a writer/reader for trivially copyable fields.
#pragma once

#include "core/error.hpp"

#include <cstddef>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

namespace pmr::detail {

using Blob = std::vector<std::byte>;

class BlobWriter {
public:
    template <class T>
    BlobWriter& put(const T& value) {
        static_assert(std::is_trivially_copyable_v<T>);
        const auto* p = reinterpret_cast<const std::byte*>(&value);
        blob_.insert(blob_.end(), p, p + sizeof(T));
        return *this;
    }
    BlobWriter& put_bytes(const Blob& bytes) {
        put<std::uint64_t>(bytes.size());
        blob_.insert(blob_.end(), bytes.begin(), bytes.end());
        return *this;
    }
    BlobWriter& put_string(const std::string& text) {
        put<std::uint64_t>(text.size());
        const auto* p = reinterpret_cast<const std::byte*>(text.data());
        blob_.insert(blob_.end(), p, p + text.size());
        return *this;
    }
    Blob take() { return std::move(blob_); }

private:
    Blob blob_;
};

/// Reads what BlobWriter wrote; a short or malformed message throws ProviderError (a peer running a
/// different pmr version, most likely).
class BlobReader {
public:
    explicit BlobReader(const Blob& blob) : blob_(blob) {}

    template <class T>
    T get() {
        static_assert(std::is_trivially_copyable_v<T>);
        need(sizeof(T));
        T value;
        std::memcpy(&value, blob_.data() + position_, sizeof(T));
        position_ += sizeof(T);
        return value;
    }
    Blob get_bytes() {
        auto n = static_cast<std::size_t>(get<std::uint64_t>());
        need(n);
        Blob out(blob_.begin() + static_cast<std::ptrdiff_t>(position_),
                 blob_.begin() + static_cast<std::ptrdiff_t>(position_ + n));
        position_ += n;
        return out;
    }
    std::string get_string() {
        auto n = static_cast<std::size_t>(get<std::uint64_t>());
        need(n);
        std::string out(reinterpret_cast<const char*>(blob_.data()) + position_, n);
        position_ += n;
        return out;
    }
    bool done() const noexcept { return position_ == blob_.size(); }

private:
    void need(std::size_t n) const {
        if (blob_.size() - position_ < n) {
            raise<ProviderError>("malformed set-up message from the peer", "",
                                 "Are both sides running the same pmr version?");
        }
    }

    const Blob& blob_;
    std::size_t position_ = 0;
};

} // namespace pmr::detail
