// SPDX-License-Identifier: MIT
// Shareable memory: an anonymous memory file (memfd) and its mapping. Another process on the node
// maps the same pages through /proc/<pid>/fd/<fd>, so nothing is ever left in /dev/shm, not even
// after a crash.
#pragma once

#include <cstddef>
#include <sys/types.h>

namespace pmr::detail {

std::size_t page_size() noexcept;
std::size_t round_up_to_page(std::size_t bytes) noexcept;

/// One mapping of (part of) a memory file. Owns the mapping and, for created ones, the descriptor.
class SharedMapping {
public:
    SharedMapping() noexcept = default;
    /// New zero-filled memory file of at least `bytes` (rounded up to pages), mapped read-write.
    /// @throws ProviderError with `where` in the message.
    static SharedMapping create(std::size_t bytes, const char* where);
    /// Maps [offset, offset + bytes) of descriptor `fd` of process `pid` (a memory file it
    /// created). The offset need not be page aligned.
    /// @throws ProviderError (e.g. the peer closed the descriptor or /proc is not accessible).
    static SharedMapping open(pid_t pid, int fd, std::size_t offset, std::size_t bytes,
                              const char* where);

    SharedMapping(const SharedMapping&) = delete;
    SharedMapping& operator=(const SharedMapping&) = delete;
    SharedMapping(SharedMapping&& other) noexcept;
    SharedMapping& operator=(SharedMapping&& other) noexcept;
    ~SharedMapping();

    /// Start of the requested range (not of the page-aligned mapping).
    std::byte* data() const noexcept { return data_; }
    std::size_t size() const noexcept { return size_; }
    /// Descriptor of a created memory file, -1 for opened ones.
    int fd() const noexcept { return fd_; }
    explicit operator bool() const noexcept { return data_ != nullptr; }

private:
    void release() noexcept;

    void* base_ = nullptr;
    std::size_t mapped_ = 0;
    std::byte* data_ = nullptr;
    std::size_t size_ = 0;
    int fd_ = -1;
};

/// Where a byte range of pmr::allocate() memory lives, so a peer can map it.
struct MemoryLocation {
    int fd = -1;
    std::size_t offset = 0;
};

/// Location of [pointer, pointer + bytes) if it lies in one pmr::allocate() block, else fd == -1.
MemoryLocation locate(const void* pointer, std::size_t bytes) noexcept;

/// Records library-owned window memory that a provider allocated (not a memory file), so that
/// pmr::is_pmr_memory() knows it; unregister before it is freed.
void register_owned_block(const void* pointer, std::size_t bytes);
void unregister_owned_block(const void* pointer) noexcept;

} // namespace pmr::detail
