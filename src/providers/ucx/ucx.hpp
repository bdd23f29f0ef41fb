// SPDX-License-Identifier: MIT
// The ucx provider: UCP one-sided puts over any network UCX supports, and load/store through UCX
// shared memory between processes on one node.
//
// Set-up. Each process has one UCP context and worker per rail (process.hpp), created when the
// first connection uses UCX and shared by all connections; a connection has one endpoint per rail
// to the peer's workers. A receive window owns an inbox (rails::Inbox: the slots of the copy
// channel, in memory UCX allocates) and registers its buffer on every rail; a send window owns a
// credit cell (one cache line of UCX memory). The put path is the shared rail protocol of
// rails/put_path.hpp over UCX (transport.hpp). Addresses and packed remote keys travel in
// describe() when the window is constructed; connect() unpacks the peer's keys.
//
// Data path of round n, chosen per window at connect() and logged with PMR_DEBUG=1; no MPI, no
// handshake per round:
//   - load/store, where ucp_rkey_ptr maps the receiver's inbox here (UCX shared memory on one
//   node):
//     the copy channel of the shm provider on the mapped inbox. The receiver's init() stores credit
//     n in the inbox; the sender copies up to 232 B inline into the slot (without waiting for the
//     credit of this round), larger messages straight into the receive buffer where it is mapped
//     too (library-owned UCX memory via ucp_rkey_ptr, pmr::allocate memory via /proc), else by
//     cross-memory attach or through a staging area; then it stores the sequence word (release).
//     No UCX call at all. (Puts are no alternative on one node: UCX 1.13 emulates a put into user
//     memory with active messages that only the receiver's progress completes.)
//   - puts, otherwise (networks): init() puts credit n into the sender's cell; post() puts the
//     payload (up to 232 B inside the slot's own put), the slot header, ucp_worker_fence (UCX does
//     not order the bytes of one put, nor separate puts without it), then the 8 B sequence word.
//     On one node (PMR_UCX_RKEY_PTR=0, or without shared-memory transports) the signal after a
//     payload is an active message on the payload's lane instead, see PMR_UCX_SIGNAL. Pieces of a
//     multi-rail post go over their rails' endpoints, each rail followed by its own completion
//     word (or message), so no rail waits for another.
//   - messages, otherwise where UCX emulates RMA on the connection's lanes (TCP: each put is a
//     message, and a fence waits for the peer's acknowledgement), see PMR_UCX_PATH: init() sends
//     credit n as an active message (receive windows up to 64 KiB: every 8th round's only, and
//     carried on the next message back to the peer where there is one, rails/protocol.hpp);
//     post() sends up to 232 B inside one active message, larger messages as one active
//     message per rail with the data: eagerly (copied into the receive buffer by the handler;
//     larger pieces in chunks of PMR_UCX_CHUNK_BYTES), or from PMR_UCX_RNDV_BYTES on (default:
//     none, 512 KiB where ranks outnumber CPUs) by UCX's rendezvous straight from the send
//     buffer into the receive buffer (ucp_am_recv_data_nbx); the receiver's registry publishes
//     the slot once all bytes of the round landed. No fence, one message per round and
//     direction (plus the credit, for windows above 64 KiB). Windows from 64 KiB on
//     (PMR_UCX_LANE_BYTES) send all their messages through a TCP connection of pmr's own to the
//     peer instead (lanes.hpp, PMR_UCX_LANES), read straight into the receive buffer.
//   - where a transfer needs the peer's progress to complete (a rendezvous, an eager send
//     beyond the socket buffers, an emulated put), windows from 64 KiB on have a standby
//     thread that progresses the workers while the application has not for 20 ms (it may wait
//     in MPI_Barrier after init() while its peer waits for its send).
//   - the receiver's wait() sees the sequence word of slot n % 4 (and the rail words) with an
//     acquire load; on the put path it also progresses the workers, which TCP needs.
//
// Teardown. A window that goes away tells its peer by a notice (an active message dispatched by
// window id through the rails registry); a send window on every rail that carried pieces, each
// notice behind that rail's puts, so that none overtakes them, without waiting for the peer's
// progress. A receiver destroyed while its sender may be putting into its memory (a credit it
// granted is unused) waits, bounded, until the sender acknowledges or finishes the round. Memory
// whose keys a peer may still unpack outlives its window (UCX 1.13 crashes on keys of freed shared
// memory).
//
// Peer failure: UCP_ERR_HANDLING_MODE_PEER to peers on other nodes; for peers on this node a pidfd,
// because in peer error-handling mode UCX 1.13 gives up its shared-memory transports.
#pragma once

#include "base/copy_channel.hpp"
#include "base/peer_process.hpp"
#include "base/shared_memory.hpp"
#include "providers/interface.hpp"
#include "providers/ucx/native.hpp"
#include "providers/ucx/process.hpp"
#include "rails/protocol.hpp"
#include "rails/windows.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <sys/types.h>
#include <vector>

namespace pmr::detail {

struct Ucx {
    static constexpr Provider id = Provider::ucx;
    static constexpr int preference = 10;
    /// Any peer: whether UCX has a transport to it shows when the endpoint is created.
    static bool reaches(const PeerInfo& /*peer*/) noexcept { return true; }
    static constexpr bool handshake = true;
    static constexpr bool has_rails = true;
    /// For the neighbour exchange: UCX stripes its own rendezvous transfers only in pieces of
    /// 16 KiB and up: smaller fragments cost more in per-put overhead than a second rail wins; on
    /// shaped 100 Mbit/s veth rails (scripts/netns-rails.sh) split lost at 64 KiB and won from
    /// 256 KiB, hence the crossover of 128 KiB.
    static constexpr std::size_t split_crossover_bytes = std::size_t{128} << 10;
    static constexpr std::size_t min_fragment_bytes = std::size_t{16} << 10;

    /// Memory for library-owned windows of UCX connections: allocated by UCX
    /// (UCP_MEM_MAP_ALLOCATE), so that a peer on the node maps it by ucp_rkey_ptr.
    static void* allocate(std::size_t bytes, const std::string& where);
    static void deallocate(void* pointer) noexcept;

    /// This side of a connection before the handshake: the process's UCX state, started here when
    /// the first connection uses UCX, and the worker addresses of every rail for the peer.
    struct Local {
        explicit Local(const ConnectionSetup& setup);
        Blob hello() const;

        std::shared_ptr<ucx::UcxProcess> process;
    };

    class Connection {
    public:
        /// @throws ProviderError if the peer cannot be reached (no transport in common).
        Connection(Local&& local, const ConnectionSetup& setup, const PeerInfo& peer,
                   const Blob& hello);
        Connection(Connection&& other) noexcept = default;
        Connection& operator=(Connection&& other) = delete;
        ~Connection() = default;

        std::size_t rails() const noexcept { return endpoints_.size(); }
        RailInfo rail(std::size_t index) const;
        /// Progresses the workers (notices, keep-alive) and checks the endpoints and the process.
        /// A peer found lost stays lost (see progress()).
        bool peer_alive();

        const std::shared_ptr<ucx::Endpoint>& endpoint(std::size_t rail) const noexcept {
            return endpoints_[rail];
        }
        ucx::UcxProcess& process() const noexcept { return *process_; }
        /// Progresses the workers of every rail. Every wait progresses them all, whatever it
        /// waits for: over TCP the peer's data and puts on any rail move only while this side
        /// progresses that rail, and the peer may be waiting for them to give what this side
        /// waits for (a credit after its send completed). Once the peer is known lost (a lane
        /// failed, or peer_alive() said so) the workers are left alone: UCX 1.13 can abort in its
        /// error path when a dead peer's half-wired TCP endpoint fails under progress
        /// (wireup_ep.c `pending_count == 0`), and nothing can arrive from that peer any more.
        void progress() const noexcept;
        bool same_node() const noexcept { return same_node_; }
        /// Whether windows that do not map each other's memory take the message path
        /// (PMR_UCX_PATH; auto: where UCX emulates RMA on an endpoint of this connection).
        bool messages() const noexcept { return messages_; }
        /// Whether a large transfer between these processes (not mapping each other's memory)
        /// moves only while the peer progresses too: on the message path, and on the put path
        /// where UCX emulates RMA. Such windows have the standby thread (UcxProcess::watch()).
        bool needs_peer_progress() const noexcept { return messages_ || emulated_; }
        /// Message path: pieces from this size on go by rendezvous (0: none), fixed at connection.
        std::size_t rendezvous_bytes() const noexcept { return rendezvous_bytes_; }
        pid_t peer_pid() const noexcept { return pid_; }
        /// Message path: credits of this side's receive windows that its next message to the
        /// peer carries (rails/protocol.hpp).
        rails::CreditCarrier& credits() const noexcept { return *credits_; }
        /// Message path: pmr's TCP lane to the peer on `rail` (providers/ucx/lanes.hpp), or null.
        ucx::Lane* lane(std::size_t rail) const noexcept {
            return rail < lanes_.size() ? lanes_[rail].get() : nullptr;
        }
        bool has_lanes() const noexcept { return !lanes_.empty(); }
        /// Whether the messages of windows whose receive window holds `bytes` take the lanes.
        bool takes_lanes(std::size_t bytes) const noexcept {
            return has_lanes() && bytes >= process_->settings().lane_bytes;
        }
        /// Whether the peer may send the messages of a window to this side's receive window of
        /// `bytes` through its lane (by its own PMR_UCX_LANE_BYTES): then lanes must be read.
        bool peer_streams(std::size_t bytes) const noexcept {
            return peer_lane_bytes_ != 0 && bytes >= peer_lane_bytes_;
        }

    private:
        std::shared_ptr<ucx::UcxProcess> process_;
        std::vector<std::shared_ptr<ucx::Endpoint>> endpoints_;
        bool same_node_ = false;
        bool messages_ = false;
        bool emulated_ = false; ///< UCX emulates RMA on an endpoint of this connection
        std::size_t rendezvous_bytes_ = 0;
        pid_t pid_ = 0;
        PeerProcess peer_process_;
        std::unique_ptr<rails::CreditCarrier> credits_ = std::make_unique<rails::CreditCarrier>();
        std::vector<std::shared_ptr<ucx::Lane>> lanes_; ///< one per rail, or none
        std::uint64_t peer_token_ = 0;                  ///< the peer's lanes token
        std::size_t peer_lane_bytes_ = 0; ///< the peer's PMR_UCX_LANE_BYTES (0: no lanes to here)
        /// The peer is known lost (sticky; on the heap so that the connection stays movable).
        std::unique_ptr<std::atomic<bool>> lost_ = std::make_unique<std::atomic<bool>>(false);
    };

    using SendWindow = rails::SendWindow<Ucx>;
    using RecvWindow = rails::RecvWindow<Ucx>;
};

} // namespace pmr::detail
