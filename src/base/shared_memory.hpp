// SPDX-License-Identifier: MIT
// Shareable memory: an anonymous memory file (memfd) and its mapping. Another process on the node
// maps the same pages through /proc/<pid>/fd/<fd>, so nothing is ever left in /dev/shm, not even
// after a crash.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <sys/types.h>

namespace pmr::detail {

std::size_t page_size() noexcept;
std::size_t round_up_to_page(std::size_t bytes) noexcept;

/// One mapping of (part of) a memory file. Owns the mapping and, for created ones, the descriptor.
class SharedMapping {
public:
    SharedMapping() noexcept = default;
    /// New zero-filled memory file of at least `bytes` (rounded up to pages), mapped read-write.
    /// @throws ResourceError when a limit is reached (open files, mappings, memory), else
    ///         ProviderError, with `where` in the message.
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

/// Where a byte range of shared memory (pmr::allocate(), allocate_shared()) lives, so a peer can
/// map it.
struct MemoryLocation {
    int fd = -1;
    std::size_t offset = 0;     ///< in the memory file
    std::uint64_t segment = 0;  ///< arena segment, unique in the process; 0: a file of its own
    std::size_t file_bytes = 0; ///< size of the memory file
};

/// Location of [pointer, pointer + bytes) if it lies in one block of shared memory, else fd == -1.
MemoryLocation locate(const void* pointer, std::size_t bytes) noexcept;

// The arena. Shared memory for pmr::allocate(), library-owned windows and providers' control
// blocks is cut from a few large memory files per process ("segments", PMR_ARENA_STEP each, kept
// until the process exits; a peer maps each of them once), so descriptors and mappings grow with
// the number of segments, not of windows. Blocks are whole pages, zero-filled; a freed block's
// pages go back to the system (hole punched) and its space to the segment. Blocks larger than a
// quarter of a segment get a memory file of their own, closed when freed.

/// A zero-filled, page-aligned block of at least `bytes` bytes (at least one page).
/// @throws ResourceError naming the limit reached (PMR_ARENA_LIMIT, open files, mappings, memory).
std::byte* allocate_shared(std::size_t bytes, const std::string& where);
/// Frees a block of allocate_shared() or pmr::allocate(); nullptr and unknown pointers are ignored.
void free_shared(void* pointer) noexcept;

/// Keeps the block at `pointer`, once freed, from being reused until `*closed` is nonzero or
/// process `pid` has exited: a peer that mapped it may still write into it until then.
void hold_shared(const void* pointer, const std::atomic<std::uint32_t>* closed, pid_t pid);

/// What the arena holds now, after ending the holds that are over (for tests and pmr-bench).
struct ArenaUsage {
    std::size_t segments = 0;    ///< memory files (arena segments and blocks with their own)
    std::size_t file_bytes = 0;  ///< their total size
    std::size_t blocks = 0;      ///< blocks handed out and not freed (held ones included)
    std::size_t block_bytes = 0; ///< their pages
    std::size_t held = 0;        ///< freed blocks kept from reuse for a peer
};
ArenaUsage arena_usage() noexcept;

/// Checks that this process can still open `count` descriptors, before a call into a library that
/// does not survive running out of them (UCX's remote keys of shared memory).
/// @throws ResourceError naming RLIMIT_NOFILE otherwise.
void require_descriptors(int count, const std::string& where);

/// A peer process's arena segments, each mapped once, shared by all connections to that process.
class PeerMemory {
public:
    explicit PeerMemory(pid_t pid) noexcept : pid_(pid) {}
    /// Address of [location.offset, + bytes) in the peer's memory; maps the segment at its first
    /// use (location.segment != 0; blocks with files of their own are mapped by SharedMapping).
    /// @throws ProviderError for a location outside its segment, ResourceError, PeerLost.
    std::byte* address(const MemoryLocation& location, std::size_t bytes, const char* where);
    /// Segments mapped.
    std::size_t mapped() const;

private:
    pid_t pid_;
    mutable std::mutex mutex_;
    std::map<std::uint64_t, SharedMapping> segments_;
};

/// The PeerMemory of process `pid`, shared while anyone holds it.
std::shared_ptr<PeerMemory> peer_memory(pid_t pid);

/// Records library-owned window memory that a provider allocated (not a memory file), so that
/// pmr::is_pmr_memory() knows it; unregister before it is freed.
void register_owned_block(const void* pointer, std::size_t bytes);
void unregister_owned_block(const void* pointer) noexcept;

} // namespace pmr::detail
