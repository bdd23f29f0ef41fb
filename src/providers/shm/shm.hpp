// SPDX-License-Identifier: MIT
// The shm provider: peers on the same node.
//
// Every receive window takes a block of the process's shared-memory arena (base/shared_memory.hpp)
// holding its control block and, when its buffer is a user buffer, a staging area of the window's
// size. The sender maps the receiver's arena segments once per peer process (PeerMemory, shared by
// all connections to it), so windows cost no descriptors and no mappings of their own; only blocks
// larger than a quarter of PMR_ARENA_STEP have memory files of their own, mapped per window. The
// one copy per transfer is then
//   - inline through the control block for small messages,
//   - memcpy straight into the receive buffer when it is pmr memory (library-owned windows and
//     buffers from pmr::allocate),
//   - process_vm_writev (cross-memory attach) into a user buffer from PMR_SHM_CMA_THRESHOLD bytes
//     on, and through the staging area below that or where the kernel refuses CMA. Rounds of at
//     least twice PMR_SHM_CHUNK are shared copies: the waiting receiver pulls chunks too
//     (process_vm_readv; "Shared copies" in base/copy_channel.hpp).
// Arena blocks are reused once freed, so a sender must never write into a block after its window
// is gone: it attaches to the control block once (a compare-and-swap of the window's generation,
// which fails if the receive window is already gone), and a receive window destroyed while its
// sender is still attached keeps its blocks (control block, pmr buffer) from reuse until the
// sender closes or exits (hold_shared).
// Memory files have no name, so a crash leaves nothing behind in /dev/shm.
#pragma once

#include "base/copy_sender.hpp"
#include "base/peer_process.hpp"
#include "base/shared_memory.hpp"
#include "providers/interface.hpp"

#include <memory>

namespace pmr::detail {

struct Shm {
    static constexpr Provider id = Provider::shm;
    static constexpr int preference = 30;
    /// Peers on this node, which can map its memory files and be written by cross-memory attach.
    static bool reaches(const PeerInfo& peer) noexcept { return peer.same_node; }
    static constexpr bool handshake = true;
    static constexpr bool has_rails = false;

    using Local = SilentLocal<Provider::shm>;

    class Connection {
    public:
        /// @throws ProviderError if the peer is on another node.
        Connection(Local&& local, const ConnectionSetup& setup, const PeerInfo& peer,
                   const Blob& hello);

        std::size_t rails() const noexcept { return 1; }
        RailInfo rail(std::size_t /*index*/) const { return {"shared memory", 0.0}; }
        /// False once the peer process has exited.
        bool peer_alive() const noexcept { return process_.alive(); }
        pid_t peer_pid() const noexcept { return process_.pid(); }
        /// The peer's arena segments, mapped once for all connections to it.
        const std::shared_ptr<PeerMemory>& peer_memory() const noexcept { return memory_; }

    private:
        PeerProcess process_;
        std::shared_ptr<PeerMemory> memory_;
    };

    /// Where a block of the receiver's shared memory lies.
    struct Place {
        std::int64_t fd; ///< -1: none (the buffer is not pmr memory)
        std::uint64_t segment;
        std::uint64_t offset;
        std::uint64_t file_bytes;
    };

    /// A receive window's description, as sent to the sender.
    struct Description {
        std::int32_t pid;
        std::int32_t has_staging;
        Place control;
        Place buffer;
        std::uint64_t generation; ///< the window's, in its control block, for the attach
        std::uint64_t address;
        std::uint64_t bytes;
    };

    /// Reads and checks a receive window's description against what the sender knows: the peer's
    /// pid from the handshake and the window size it announced. Whether the descriptors name
    /// memory files large enough is checked when they are mapped (SharedMapping::open).
    /// @throws ProviderError naming `where` for anything that does not fit.
    static Description parse_description(const Blob& message, pid_t peer_pid,
                                         std::size_t peer_bytes, const std::string& where);

    class SendWindow : public CopySenderCalls<SendWindow> {
    public:
        explicit SendWindow(const WindowSpec& spec) noexcept;

        /// @throws ProviderError for a description that does not fit the peer's window.
        void connect(Connection& connection, const Blob& peer, std::size_t peer_bytes);

    private:
        friend class CopySenderCalls<SendWindow>;
        /// Address of `place` in the peer's memory, mapped into `own` if it has a file of its own.
        std::byte* map(Connection& connection, const Place& place, std::size_t bytes,
                       SharedMapping& own);

        const std::string* where_;
        std::shared_ptr<PeerMemory> peer_memory_; // keeps the mappings of the peer's segments
        SharedMapping control_;    // the receiver's control block and staging area, own file only
        SharedMapping buffer_;     // the receiver's buffer, when pmr memory with a file of its own
        ClosingCopySender sender_; // last: closes before the members above go
    };

    class RecvWindow : public CopyReceiverCalls {
    public:
        explicit RecvWindow(const WindowSpec& spec);
        RecvWindow(RecvWindow&&) noexcept = default;
        RecvWindow& operator=(RecvWindow&&) noexcept = default;
        ~RecvWindow();

        Blob describe() const;
        void connect(Connection& connection, const Blob& peer, std::size_t peer_bytes) noexcept;

    private:
        struct Free {
            void operator()(std::byte* block) const noexcept { free_shared(block); }
        };

        std::unique_ptr<std::byte, Free> control_; // control block and staging, from the arena
        MemoryLocation control_location_;
        std::uint64_t generation_ = 0;
        MemoryLocation location_;
        const void* buffer_ = nullptr;
        std::uintptr_t address_ = 0;
        std::size_t bytes_ = 0;
        Connection* connection_ = nullptr;
    };
};

} // namespace pmr::detail
