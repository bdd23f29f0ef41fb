// SPDX-License-Identifier: MIT
// Byte strings for set-up messages, and a writer/reader for trivially copyable fields.
#pragma once

#include "base/error.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
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

/// Reads what BlobWriter wrote. Set-up messages come from another process, which may run another
/// version or be buggy: a short, oversized or otherwise malformed message throws ProviderError
/// naming `where` (the object that received it), never reads past the end.
class BlobReader {
public:
    explicit BlobReader(const Blob& blob, std::string where = {})
        : blob_(blob), where_(std::move(where)) {}
    /// The reader keeps a reference: a temporary blob would be gone before it is read.
    BlobReader(Blob&& blob, std::string where = {}) = delete;

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
        auto n = length();
        Blob out(blob_.begin() + static_cast<std::ptrdiff_t>(position_),
                 blob_.begin() + static_cast<std::ptrdiff_t>(position_ + n));
        position_ += n;
        return out;
    }
    std::string get_string() {
        auto n = length();
        std::string out(reinterpret_cast<const char*>(blob_.data()) + position_, n);
        position_ += n;
        return out;
    }
    bool done() const noexcept { return position_ == blob_.size(); }
    /// Throws unless every byte was read: trailing bytes mean the peer speaks another format.
    void finish() const {
        if (!done()) {
            malformed(std::to_string(blob_.size() - position_) + " unexpected trailing bytes");
        }
    }
    /// Throws ProviderError for a message whose content is wrong (e.g. a field out of range).
    [[noreturn]] void malformed(const std::string& what) const {
        raise<ProviderError>("malformed set-up message from the peer: " + what, where_,
                             "Are both sides running the same pmr version?");
    }

private:
    std::size_t length() {
        const auto n = get<std::uint64_t>();
        need(n);
        return static_cast<std::size_t>(n);
    }
    void need(std::uint64_t n) const {
        if (blob_.size() - position_ < n) {
            malformed("it ends " + std::to_string(n - (blob_.size() - position_)) + " bytes early");
        }
    }

    const Blob& blob_;
    std::string where_;
    std::size_t position_ = 0;
};

} // namespace pmr::detail
