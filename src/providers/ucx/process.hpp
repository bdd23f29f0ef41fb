// SPDX-License-Identifier: MIT
// Process-wide UCX state of the ucx provider: the settings, one context and worker per rail
// (created at first use and shared by every connection), one endpoint per peer and rail, the
// memory of the credit cells senders receive credits in, the memory UCX allocated for
// library-owned windows, and the notices between windows (active messages, handed to the rails
// registry, which dispatches them by window id).
#pragma once

#include "base/blob.hpp"
#include "providers/ucx/lanes.hpp"
#include "providers/ucx/native.hpp"
#include "rails/cell_pool.hpp"
#include "rails/kept_memory.hpp"
#include "rails/protocol.hpp"
#include "rails/registry.hpp"

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace pmr::detail::ucx {

using rails::max_rails;

/// The UCX settings, read once. The rails come from PMR_UCX_DEVICES / PMR_UCX_RAILS or the generic
/// PMR_DEVICES / PMR_RAILS (rails/settings.hpp).
struct UcxSettings {
    /// One rail per device (UCX_NET_DEVICES of that rail's context); empty: UCX's choice.
    std::vector<std::string> devices;
    /// Contexts (and workers) per process.
    std::size_t rails = 1;
    /// PMR_UCX_RKEY_PTR=0 disables the load/store path through ucp_rkey_ptr (puts everywhere).
    bool load_store = true;
    /// PMR_UCX_PEER_ERRORS=auto|on|off: UCP_ERR_HANDLING_MODE_PEER for endpoints. auto: only to
    /// peers on other nodes, because on one node UCX then gives up its shared-memory transports.
    enum class PeerErrors { automatic, on, off } peer_errors = PeerErrors::automatic;
    /// PMR_UCX_SIGNAL=auto|put|am: how the put path signals a round that carried a payload.
    /// put: the sequence word is put after a fence; am: an active message on the payload's lane.
    /// auto: am to peers on this node (UCX emulates puts into their user memory with active
    /// messages, which a fence does not order against a shared-memory write), put otherwise.
    enum class Signal { automatic, put, am } signal = Signal::automatic;
    /// PMR_UCX_PATH=auto|put|message: the data path between processes that do not map each
    /// other's memory. put: puts, fence and signal (rails/protocol.hpp); message: one active
    /// message per round with the data (eager, copied into the receive buffer on arrival)
    /// and credits as messages; auto: message where UCX emulates RMA on an endpoint of the
    /// connection (Endpoint::rma_emulated(), e.g. TCP), put where it is native (RDMA, shared
    /// memory).
    enum class Path { automatic, put, message } path = Path::automatic;
    /// PMR_UCX_RNDV_BYTES: pieces of the message path (the TCP-only connections, unless
    /// PMR_UCX_PATH says otherwise) from this size on travel by UCX's rendezvous, from the send
    /// buffer straight into the receive buffer; smaller ones eagerly, in chunks (below). 0: every
    /// piece eagerly. Unset: eagerly where every rank of this node has a CPU of its own (over TCP
    /// loopback chunks took 0.65-0.9x the time of a rendezvous from 256 KiB to 16 MiB: a
    /// rendezvous adds two round trips before its data, chunks keep the socket busy from the first
    /// byte), and from oversubscribed_rendezvous_bytes on where ranks outnumber CPUs (there the
    /// CPU time is what counts, and chunks cost each a socket read and a copy more: 0.5-0.7x a
    /// rendezvous's speed at 4 ranks on 2 cores from 1 MiB). docs/ucx-tcp-measurements.md.
    std::optional<std::size_t> rendezvous_bytes;
    static constexpr std::size_t oversubscribed_rendezvous_bytes = std::size_t{512} * 1024;
    /// UCX over TCP delivers an active message of up to its receive segment (UCX_TCP_RX_SEG_SIZE,
    /// 64 KiB) less the headers in one piece; a larger eager message comes in fragments that the
    /// receiver's UCX reassembles in a buffer of its own before pmr copies it once more.
    static constexpr std::size_t default_chunk_bytes = std::size_t{64} * 1024 - 256;
    /// PMR_UCX_CHUNK_BYTES: an eager piece of the message path larger than this travels as
    /// several active messages of at most this size, each copied into the receive buffer on
    /// arrival. 0: one message per piece; otherwise at least min_chunk_bytes. With a larger
    /// UCX_TCP_RX_SEG_SIZE, give that less 256 B.
    std::size_t chunk_bytes = default_chunk_bytes;
    static constexpr std::size_t min_chunk_bytes = 1024;
    /// PMR_UCX_LANES=auto|off: where a connection's messages travel over UCX's TCP transport,
    /// windows from lane_bytes on send every message through a TCP connection of pmr's own per
    /// peer and rail, read straight into the receive window (lanes.hpp); off: everything through
    /// UCX (chunks or rendezvous, above).
    bool lanes = true;
    /// PMR_UCX_LANE_BYTES: the smallest receive window whose messages take the lanes. Over TCP
    /// loopback 64 KiB rounds took 0.6-0.7x the time through a lane that they take through UCX;
    /// at 32 KiB and below the lane was slower (4 KiB: 1.5x the time, 8 B: 1.6x: a round's credit
    /// still goes through UCX, and the receiver polls both). docs/providers.md, UCX data paths.
    std::size_t lane_bytes = default_lane_bytes;
    static constexpr std::size_t default_lane_bytes = std::size_t{64} * 1024;
};

/// The settings of this process, read at the first call. @throws ArgumentError for malformed
/// values.
const UcxSettings& ucx_settings();
/// Reads the variables now (for tests). @throws ArgumentError for malformed values.
UcxSettings read_ucx_settings();

struct Rail {
    std::shared_ptr<Context> context;
    std::shared_ptr<Worker> worker;
    std::string device; ///< empty: UCX's choice
};

/// Message-path windows from this size on (the peer's window: no message is larger) have the
/// standby thread of UcxProcess::watch(): a rendezvous needs both sides' progress, and so does an
/// eager send larger than what the socket buffers take.
constexpr std::size_t standby_bytes = std::size_t{64} * 1024;

using rails::CreditCell;
using rails::Inbox;
using rails::Notice;
using rails::NoticeKind;

class UcxProcess {
public:
    /// The rails of this process, created at the first call.
    /// @throws ProviderError if UCX cannot be initialised, ArgumentError for bad settings.
    static std::shared_ptr<UcxProcess> instance(const std::string& where);
    /// The rails if they exist (null before the first instance() and after exit began).
    static std::shared_ptr<UcxProcess> existing() noexcept;

    UcxProcess(UcxSettings settings, const std::string& where);
    UcxProcess(const UcxProcess&) = delete;
    UcxProcess& operator=(const UcxProcess&) = delete;
    ~UcxProcess();

    std::size_t size() const noexcept { return rails_.size(); }
    /// The endpoint of `rail` to the worker at `address`, shared by every connection to that peer:
    /// closing an endpoint may have to wait for the peer, so endpoints are closed only at exit.
    std::shared_ptr<Endpoint> endpoint(std::size_t rail, const Blob& address, bool peer_errors,
                                       const std::string& where);
    const Rail& rail(std::size_t index) const noexcept { return rails_[index]; }
    const UcxSettings& settings() const noexcept { return settings_; }
    /// Where the message path sends pieces by rendezvous from, for a connection made now (0:
    /// never): UcxSettings::rendezvous_bytes, by default chosen by whether this node runs more
    /// ranks than it has CPUs (base/backoff.hpp).
    /// @throws ArgumentError for a malformed PMR_SPIN_US.
    std::size_t rendezvous_bytes() const;
    /// The windows notices reach, and the free credit cells.
    rails::Registry& registry() noexcept { return registry_; }

    /// A credit cell, from a new chunk of rail-0 UCX memory when none is free.
    CreditCell acquire_cell(const std::string& where);
    /// Packed remote key of the cell's chunk.
    Blob cell_key(const CreditCell& cell) const;

    /// Keeps `memory` alive until the rails go away (a peer may still write into it).
    void bury(std::shared_ptr<MemoryHandle> memory) noexcept;

    /// Sends `notice` through `endpoint` (rail 0) without waiting for it; `reply` lets the handler
    /// answer on the same connection.
    void send_notice(const Endpoint& endpoint, const Notice& notice, bool reply,
                     const std::string& where);
    /// Sends `notice` and `bytes` of `data` (a small message) from memory that stays valid until
    /// the returned request is done (data path).
    static Request signal(const Endpoint& endpoint, const Notice& notice, const void* data,
                          std::size_t bytes, const std::string& where);
    /// Sends a piece of a round on the message path with its `bytes` of `data`: eagerly, or from
    /// `rendezvous_bytes` on (if not 0; the connection's rendezvous_bytes()) by UCX's rendezvous
    /// straight from `data` into the receive buffer. `piece` and `data` stay valid until the
    /// returned request is done.
    Request send_piece(const Endpoint& endpoint, const rails::Piece& piece, const void* data,
                       std::size_t bytes, std::size_t rendezvous_bytes, const std::string& where);

    /// A window of the message path whose messages may need the peer's progress to complete
    /// (from standby_bytes on) is connected: until the matching unwatch(), a standby thread
    /// progresses the workers whenever no application thread has for 20 ms. A rendezvous needs
    /// both sides' progress until the data has moved (as does an eager send larger than the socket
    /// buffers), and an application may leave pmr in the middle of one: the receiver after
    /// init() into MPI_Barrier while its peer waits for its send, or after a test(); the sender
    /// after a test().
    void watch();
    /// No standby thread could be started: the message path sends eagerly at every size.
    bool standby_failed() const noexcept { return standby_failed_.load(std::memory_order_relaxed); }
    void unwatch() noexcept;
    /// Called by every progress of a connection from the application: the standby thread stays
    /// idle while these continue.
    /// pmr's TCP lanes of this process, or null (PMR_UCX_LANES=off).
    TcpLanes* lanes() const noexcept { return lanes_.get(); }
    /// Reads and writes the TCP lanes where a window that may use them exists or data waits to
    /// be written; true if anything moved.
    bool progress_lanes() noexcept {
        if (lanes_ == nullptr) {
            return false;
        }
        if (large_windows_.load(std::memory_order_relaxed) == 0 && !lanes_->sending() &&
            (lane_looks_.fetch_add(1, std::memory_order_relaxed) & 63U) != 0) {
            // No window here takes lanes, but frames may still come (rounds sent ahead of a
            // window closed since, new lanes to accept): a look every 64th progress.
            return false;
        }
        return lanes_->progress();
    }
    void note_progress() noexcept {
        progress_calls_.store(progress_calls_.load(std::memory_order_relaxed) + 1,
                              std::memory_order_relaxed);
    }

    // Library-owned memory
    // --------------------------------------------------------------------------
    /// A zero-filled block of the arena (base/shared_memory.hpp) registered on rail 0: each arena
    /// segment is registered and packed once, and its blocks share that key; a block with a
    /// memory file of its own is registered alone. Freed with the handle. Without the load/store
    /// path (PMR_UCX_RKEY_PTR=0) a block is UCX's own memory instead (UCP_MEM_MAP_ALLOCATE, one
    /// registration per block): UCX 1.13 puts natively on the node (posix, sysv) only into memory
    /// its shared-memory domains allocated, and emulates puts into any other memory with active
    /// messages, which land only while the initiator's worker progresses (a credit granted before
    /// the receiver enters MPI would wait there).
    /// @throws ResourceError where a limit is reached, ProviderError.
    std::shared_ptr<MemoryHandle> arena_block(std::size_t bytes, const std::string& where);
    void* allocate(std::size_t bytes, const std::string& where);
    void deallocate(void* pointer) noexcept;
    /// The allocation containing [pointer, pointer + bytes), or null.
    std::shared_ptr<MemoryHandle> allocation(const void* pointer, std::size_t bytes) const;

private:
    /// Memory of credit cells, and its key for peers.
    struct Chunk {
        std::shared_ptr<MemoryHandle> memory;
        Blob key;
        std::byte* data() const noexcept { return memory->data(); }
    };

    static ucs_status_t on_notice(void* arg, const void* header, std::size_t header_length,
                                  void* data, std::size_t length, const ucp_am_recv_param_t* param);
    /// The handler of pieces on one rail's worker.
    struct PieceReceiver {
        UcxProcess* process = nullptr;
        ucp_worker_h worker = nullptr;
    };
    /// A piece arriving by rendezvous: what its receive completion publishes.
    struct Landing {
        UcxProcess* process = nullptr;
        rails::Piece piece;
    };
    static ucs_status_t on_piece(void* arg, const void* header, std::size_t header_length,
                                 void* data, std::size_t length, const ucp_am_recv_param_t* param);
    static void on_piece_landed(void* request, ucs_status_t status, std::size_t length,
                                void* user_data);
    void handle(const Notice& notice, const void* data, std::size_t bytes, ucp_ep_h reply_endpoint);
    ucs_status_t post_notice(ucp_ep_h endpoint, const Notice& notice, bool reply);
    void reap_notices_locked() noexcept;

    /// A notice UCX has not finished sending: its header must stay valid until then, and the
    /// request is kept because a freed request reports nothing (ucp_request_free).
    struct NoticeInFlight {
        void* request = nullptr;
        std::unique_ptr<Notice> header;
    };

    UcxSettings settings_;
    std::vector<Rail> rails_;
    std::vector<std::unique_ptr<PieceReceiver>> piece_receivers_; ///< per rail
    std::mutex endpoints_mutex_;
    std::vector<std::map<Blob, std::shared_ptr<Endpoint>>> endpoints_; ///< per rail, by address
    rails::Registry registry_;
    std::unique_ptr<TcpLanes> lanes_; ///< reads into registry_'s windows: declared after it
    /// Windows from standby_bytes on (watch()): receive windows among them may get lane data.
    std::atomic<std::size_t> large_windows_{0};
    std::atomic<std::uint32_t> lane_looks_{0};

    rails::CellPool<Chunk> cells_;
    mutable std::mutex mutex_; // segments_
    /// Registrations of the arena's segments on rail 0, by segment; kept as long as this.
    std::map<std::uint64_t, std::shared_ptr<const MemoryHandle>> segments_;
    rails::KeptMemory<MemoryHandle> kept_;

    std::mutex notices_mutex_; // notices_; never held while UCX runs (its handlers post notices)
    std::list<NoticeInFlight> notices_;

    /// The standby thread (see watch()).
    void stand_by() noexcept;
    void stop_standby() noexcept;
    std::mutex standby_mutex_; // watched_, standby_; never held while UCX runs
    std::condition_variable standby_cv_;
    std::size_t watched_ = 0;
    std::thread standby_;
    std::atomic<bool> standby_stopping_{false};
    /// No standby thread could be started: no rendezvous from this side.
    std::atomic<bool> standby_failed_{false};
    /// Whether every worker is thread-safe (a second thread may progress it): else no rendezvous.
    bool workers_thread_safe_ = true;
    /// Progress calls of the application (note_progress()); the standby thread compares.
    std::atomic<std::uint64_t> progress_calls_{0};
};

} // namespace pmr::detail::ucx
