// SPDX-License-Identifier: MIT
// TCP lanes of pmr's own beside UCX, for the large windows of the message path.
//
// Over TCP, UCX delivers an eager message into a receive segment of its own, from which pmr copies
// it into the receive window, and its rendezvous (which avoids the copy) costs two round trips
// before the data. Open MPI's TCP transport reads a message straight into the user's buffer. A
// lane does the same for pmr: where a connection's messages travel over UCX's TCP transport, each
// process also opens one TCP connection of its own per peer and rail (outgoing: this side writes,
// the peer only reads), and every message of a window whose receive window holds at least
// UcxSettings::lane_bytes (64 KiB) goes through it (rails::stream_flag): a round's data as one
// frame per rail (a header naming the window, the round and the offset, then the data), which the
// receiver reads with recv() straight into the window (Registry::destination()); the credit of the
// round has already said that the buffer is free, so no handshake precedes the data, and nothing is
// copied in user space on either side. The window's small rounds (inside a notice, and rounds that
// run ahead of their credit, which the registry keeps aside) and its sender_closed notice take the
// same lane, so that none overtakes another. Credits and set-up notices stay on UCX. A process
// that sends and receives at once turns from writing to reading at least every turn_bytes
// (lanes.cpp), so that neither direction's socket buffer stays full.
//
// Set-up: every process listens on one TCP port (any address) and sends the port, a random token
// and its IPv4 addresses in the connection hello. A connection whose UCX lanes are TCP connects,
// for each rail, to the peer's address on the subnet of the device UCX uses (127.0.0.1 over
// loopback), bound to this side's address on that device, and introduces itself with both tokens;
// the listener accepts in its progress, and closes a connection that does not introduce itself
// with its token. The connect completes in the peer's kernel (its listen queue), so it never waits
// for the peer's application; a connect that fails (on any rail) leaves the connection on UCX
// alone, which the receiver needs no word of: it reads both. Lanes are shared by every connection
// to the same peer, like UCX endpoints, and live until the process's UCX state goes. Lanes are
// read where a window of the process may use them (UcxProcess::progress_lanes()). A lane that
// fails (the peer died: EPIPE, ECONNRESET, end of stream) fails its pending sends with PeerLost and
// makes the connection report its peer gone.
#pragma once

#include "base/blob.hpp"
#include "rails/protocol.hpp"
#include "rails/registry.hpp"

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace pmr::detail::ucx {

class Lane;

/// A send that did not go into the kernel whole at once: done once its last byte has.
struct LaneSend {
    enum State : int { pending = 0, done = 1, failed = 2 };
    std::atomic<int> state{pending};
    Lane* lane = nullptr; ///< lives as long as the process's UCX state
};

/// One frame on a lane: what follows it (`bytes` of data) and where it goes.
struct LaneFrame {
    static constexpr std::uint32_t magic_value = 0x4c726d70; // "pmrL"
    enum Kind : std::uint32_t { introduce_frame = 1, piece_frame = 2, notice_frame = 3 };
    std::uint32_t magic = magic_value;
    std::uint32_t kind = piece_frame;
    std::uint64_t bytes = 0; ///< data after the header
    /// piece: the piece; notice: its notice; introduce: notice.target the listener's token,
    /// notice.from the connecting process's token, notice.round the rail
    rails::Piece piece;
};

/// This process's outgoing TCP connection to one peer on one rail.
class Lane {
public:
    /// `loopback`: over the loopback device (larger writes). `sending` counts the lanes of the
    /// process that have data queued.
    Lane(int fd, std::uint64_t peer_token, std::string peer_text, bool loopback,
         std::atomic<std::size_t>* sending) noexcept;
    Lane(const Lane&) = delete;
    Lane& operator=(const Lane&) = delete;
    ~Lane();

    /// Sends `piece` with its `bytes` of `data`, as much as the socket takes now. Returns null if
    /// the whole frame went, else the pending send (`data` must stay valid until it is done).
    /// @throws PeerLost if the lane has failed.
    std::shared_ptr<LaneSend> send(const rails::Piece& piece, const void* data, std::size_t bytes,
                                   const std::string& where);
    /// Sends a notice (copied) with `bytes` of `data` behind everything sent before, never
    /// waiting; returns as send(). `kind` introduce is the lane's first frame.
    /// @throws PeerLost if the lane has failed.
    std::shared_ptr<LaneSend> notify(const rails::Notice& notice, const void* data,
                                     std::size_t bytes, const std::string& where,
                                     LaneFrame::Kind kind = LaneFrame::notice_frame);
    /// Writes what is queued, as far as the socket takes it; true if anything moved.
    bool flush() noexcept;
    bool failed() const noexcept { return failed_.load(std::memory_order_acquire); }
    bool sending() const noexcept { return queued_.load(std::memory_order_relaxed) != 0; }
    std::uint64_t peer_token() const noexcept { return peer_token_; }

private:
    struct Queued {
        LaneFrame frame;
        const std::byte* data = nullptr;
        std::size_t bytes = 0;   ///< of data
        std::size_t written = 0; ///< of frame and data
        std::shared_ptr<LaneSend> send;
    };
    /// Writes queue_'s front entries; mutex_ held. False on a socket error (then failed).
    bool write_locked() noexcept;
    void fail_locked(int error) noexcept;
    std::shared_ptr<LaneSend> enqueue_locked(const LaneFrame& frame, const void* data,
                                             std::size_t bytes, const std::string& where);

    int fd_ = -1;
    std::uint64_t peer_token_ = 0;
    std::string peer_text_;
    std::atomic<std::size_t>* sending_ = nullptr;
    std::size_t write_bytes_ = 0; ///< at most per sendmsg()
    std::mutex mutex_;            // queue_, the socket's writes
    std::deque<Queued> queue_;
    std::atomic<std::size_t> queued_{0};
    std::atomic<bool> failed_{false};
    int error_ = 0;
};

/// What the peer's hello says about its lanes.
struct LanePeer {
    struct Address {
        std::uint32_t ipv4 = 0; ///< network byte order
        std::uint32_t mask = 0; ///< network byte order
    };
    bool listening = false;
    std::uint64_t token = 0;
    std::uint64_t lane_bytes = 0; ///< its UcxSettings::lane_bytes
    std::uint16_t port = 0;
    std::vector<Address> addresses;
};

/// The lanes of this process: its listener, the lanes it opened (outgoing) and those it accepted
/// (incoming, read into the registry's windows).
class TcpLanes {
public:
    /// Opens the listener; if that fails, lanes are off in this process (logged with PMR_DEBUG).
    explicit TcpLanes(rails::Registry& registry) noexcept;
    TcpLanes(const TcpLanes&) = delete;
    TcpLanes& operator=(const TcpLanes&) = delete;
    ~TcpLanes();

    bool listening() const noexcept { return listener_ >= 0; }
    /// Appends this process's part of a connection hello (`lane_bytes`: from which receive
    /// window size this process streams windows through lanes).
    void describe(BlobWriter& hello, std::uint64_t lane_bytes) const;
    static LanePeer read(BlobReader& hello);

    /// The outgoing lane to `peer` on `rail`, whose UCX traffic leaves through local network
    /// `device` ("lo": loopback), connected now unless another connection did; null (logged with
    /// PMR_DEBUG) if the peer has no lanes or cannot be reached.
    std::shared_ptr<Lane> open(std::size_t rail, const LanePeer& peer, const std::string& device,
                               const std::string& where);
    /// Accepts new lanes, reads what arrived and writes what is queued; true if anything moved.
    bool progress() noexcept;
    /// Whether a lane from or to the process with `token` has ended (the peer is gone).
    bool lost(std::uint64_t token) const noexcept;
    /// Frames with data or notices read from lanes so far (for tests).
    std::uint64_t frames() const noexcept { return frames_.load(std::memory_order_relaxed); }
    /// The listener's port (for tests).
    std::uint16_t port() const noexcept { return port_; }
    /// Accepted connections that have not introduced themselves yet (for tests).
    std::size_t strangers() const noexcept { return strangers_.load(std::memory_order_relaxed); }
    /// The listener takes connections from any address, and a client that connects and says
    /// nothing must not keep descriptors forever; pmr's own lanes introduce themselves in their
    /// first bytes. So a connection that has not (its socket is read once more first) is closed
    /// after stranger_seconds; beyond max_strangers such connections, the oldest that have been
    /// silent for a second; beyond hard_strangers, the oldest at once. (While the process
    /// progresses its lanes: from every wait where a window uses them, else every 64th.)
    static constexpr std::size_t max_strangers = 64;
    static constexpr std::size_t hard_strangers = 256;
    static constexpr int stranger_seconds = 60;
    /// Writes what is queued for up to `seconds` (at exit: the last frames, e.g. a window's
    /// sender_closed, must not die with the process's UCX state).
    void drain(double seconds) noexcept;
    /// Whether a lane has data queued.
    bool sending() const noexcept { return sending_lanes_.load(std::memory_order_relaxed) != 0; }

private:
    /// A lane a peer opened to this process.
    struct Incoming {
        int fd = -1;
        std::uint64_t peer_token = 0; ///< 0 until introduced
        std::chrono::steady_clock::time_point accepted;
        LaneFrame frame;
        std::size_t header_bytes = 0; ///< of frame, read so far
        /// Where the data of the current frame goes: straight into a window, into `held` (a
        /// notice's data, a piece ahead of its round) or nowhere (the window is gone).
        enum class Data : std::uint8_t { none, direct, held, dropped } data = Data::none;
        std::byte* into = nullptr; ///< direct
        std::size_t data_bytes = 0;
        std::size_t data_read = 0;
        std::vector<std::byte> held;
    };
    /// The frame's data is all here: hand it to the registry.
    void deliver(Incoming& in) noexcept;
    /// Accepts up to max_strangers waiting connections; true if it accepted one.
    bool accept_all() noexcept;
    /// Reads what `in` has; false once it has ended (then closed and forgotten).
    bool read(Incoming& in, bool& moved) noexcept;
    /// Closes and forgets `in`.
    void close_incoming(Incoming& in) noexcept;
    /// Closes connections that stayed strangers too long, and the oldest beyond the limits;
    /// true if it read data.
    bool turn_away_strangers() noexcept;
    void mark_lost(std::uint64_t token) noexcept;

    rails::Registry& registry_;
    std::uint64_t token_ = 0;
    int listener_ = -1;
    std::uint16_t port_ = 0;
    int epoll_ = -1;
    std::vector<LanePeer::Address> addresses_;

    std::mutex open_mutex_; // outgoing_
    std::map<std::pair<std::size_t, std::uint64_t>, std::shared_ptr<Lane>> outgoing_;
    std::vector<std::shared_ptr<Lane>> all_outgoing_; ///< never shrinks until exit
    std::atomic<std::size_t> sending_lanes_{0};       ///< outgoing lanes with data queued

    std::mutex receive_mutex_; // incoming_, the reads; one thread reads at a time
    std::list<Incoming> incoming_;
    std::vector<std::byte> scratch_; ///< where dropped data goes
    std::atomic<std::uint64_t> frames_{0};
    std::atomic<std::size_t> strangers_{0}; ///< in incoming_, not introduced yet
    std::chrono::steady_clock::time_point strangers_checked_;

    mutable std::mutex lost_mutex_;
    std::set<std::uint64_t> lost_;
    std::atomic<bool> any_lost_{false};
};

/// The network device of the first lane in ucp_ep_print_info's description if it is a TCP lane
/// ("lane[0]:  0:tcp/lo.0 md[0] ..." gives "lo"), else empty; public for tests.
std::string tcp_lane_device(const std::string& info);

} // namespace pmr::detail::ucx
