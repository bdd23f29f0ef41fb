// SPDX-License-Identifier: MIT
/// @file buffer.hpp
/// Page-aligned heap buffer for the MPI baselines and pmr's user-buffer variants.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

namespace pmr_bench {

/// Ordinary process memory (not pmr::allocate), page aligned so that neither MPI nor pmr gains or
/// loses from alignment, and touched once so page faults stay out of the timed loops.
class AlignedBuffer {
public:
    AlignedBuffer() = default;
    explicit AlignedBuffer(std::size_t bytes) : bytes_(bytes) {
        if (bytes == 0) {
            return;
        }
        std::size_t rounded = (bytes + page - 1) / page * page;
        data_ = static_cast<unsigned char*>(std::aligned_alloc(page, rounded));
        if (data_ == nullptr) {
            throw std::bad_alloc();
        }
        std::memset(data_, 0, rounded);
    }
    AlignedBuffer(const AlignedBuffer&) = delete;
    AlignedBuffer& operator=(const AlignedBuffer&) = delete;
    AlignedBuffer(AlignedBuffer&& other) noexcept
        : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
    AlignedBuffer& operator=(AlignedBuffer&& other) noexcept {
        std::swap(data_, other.data_);
        std::swap(bytes_, other.bytes_);
        return *this;
    }
    ~AlignedBuffer() { std::free(data_); }

    unsigned char* data() noexcept { return data_; }
    const unsigned char* data() const noexcept { return data_; }
    std::size_t size() const noexcept { return bytes_; }

private:
    static constexpr std::size_t page = 4096;
    unsigned char* data_ = nullptr;
    std::size_t bytes_ = 0;
};

} // namespace pmr_bench
