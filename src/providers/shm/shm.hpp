// SPDX-License-Identifier: MIT
// The shm provider: peers on the same node.
//
// Every receive window owns a small memory file (memfd) holding its control block and, when its
// buffer is a user buffer, a staging area of the window's size (address space only until used). The
// sender maps that file through /proc/<pid>/fd/<fd> once, when the window is first used, and also
// maps the receive buffer itself when it is pmr memory. The one copy per transfer is then
//   - inline through the control block for small messages,
//   - memcpy straight into the receive buffer when it is pmr memory (library-owned windows and
//     buffers from pmr::allocate),
//   - process_vm_writev (cross-memory attach) into a user buffer from PMR_SHM_CMA_THRESHOLD bytes
//     on, and through the staging area below that or where the kernel refuses CMA. Rounds of at
//     least twice PMR_SHM_CHUNK are shared copies: the waiting receiver pulls chunks too
//     (process_vm_readv; "Shared copies" in base/copy_channel.hpp).
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

    struct Local {
        explicit Local(const ConnectionSetup& /*setup*/) noexcept {}
        Blob hello() const { return {}; }
    };

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

    private:
        PeerProcess process_;
    };

    /// A receive window's description, as sent to the sender.
    struct Description {
        std::int32_t pid;
        std::int32_t control_fd;
        std::int32_t buffer_fd; ///< -1: the buffer is not pmr memory
        std::int32_t has_staging;
        std::uint64_t buffer_offset;
        std::uint64_t address;
        std::uint64_t bytes;
    };

    /// Reads and checks a receive window's description against what the sender knows: the peer's
    /// pid from the handshake and the window size it announced. Whether the descriptors name
    /// memory files large enough is checked when they are mapped (SharedMapping::open).
    /// @throws ProviderError naming `where` for anything that does not fit.
    static Description parse_description(const Blob& message, pid_t peer_pid,
                                         std::size_t peer_bytes, const std::string& where);

    class SendWindow {
    public:
        explicit SendWindow(const WindowSpec& spec) noexcept;
        SendWindow(SendWindow&&) noexcept = default;
        SendWindow& operator=(SendWindow&&) noexcept = default;
        ~SendWindow() { sender_.close(); }

        Blob describe() const { return {}; }
        /// @throws ProviderError for a description that does not fit the peer's window.
        void connect(Connection& connection, const Blob& peer, std::size_t peer_bytes);
        void post(const std::byte* data, std::size_t bytes) { sender_.post(data, bytes); }
        bool test() { return sender_.progress(); }
        bool peer_gone() const noexcept { return false; }

    private:
        const std::string* where_;
        SharedMapping control_; // the receiver's control block and staging area
        SharedMapping buffer_;  // the receiver's buffer, when it is pmr memory
        CopySender sender_;
    };

    class RecvWindow {
    public:
        explicit RecvWindow(const WindowSpec& spec);
        RecvWindow(RecvWindow&&) noexcept = default;
        RecvWindow& operator=(RecvWindow&&) noexcept = default;
        ~RecvWindow();

        Blob describe() const;
        void connect(Connection& connection, const Blob& peer, std::size_t peer_bytes) noexcept;
        void init() noexcept { receiver_.init(); }
        bool test() noexcept { return receiver_.test(); }
        std::size_t received_bytes() const noexcept { return receiver_.received_bytes(); }
        bool peer_gone() const noexcept { return receiver_.sender_closed(); }

    private:
        SharedMapping control_;
        MemoryLocation location_;
        std::uintptr_t address_ = 0;
        std::size_t bytes_ = 0;
        Connection* connection_ = nullptr;
        CopyReceiver receiver_;
    };
};

} // namespace pmr::detail
