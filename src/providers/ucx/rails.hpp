// SPDX-License-Identifier: MIT
// Process-wide UCX state of the ucx provider: the settings, one context and worker per rail
// (created at first use and shared by every connection), one endpoint per peer and rail, the credit
// cells senders receive credits in, the memory UCX allocated for library-owned windows, and the
// messages between windows (active messages dispatched by window id).
#pragma once

#include "core/blob.hpp"
#include "providers/common/channel.hpp"
#include "providers/ucx/native.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace pmr::detail::ucx {

inline constexpr std::size_t max_rails = 16;

/// PMR_UCX_* environment variables, read once.
struct UcxSettings {
    /// PMR_UCX_DEVICES=lo,eth0: one rail per device (UCX_NET_DEVICES of that rail's context).
    std::vector<std::string> devices;
    /// PMR_UCX_RAILS=n, or the number of devices: contexts (and workers) per process.
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
};

/// The settings of this process, read at the first call. @throws ArgumentError for malformed
/// values.
const UcxSettings& ucx_settings();
/// Reads the PMR_UCX_* variables now (for tests). @throws ArgumentError for malformed values.
UcxSettings read_ucx_settings();

struct Rail {
    std::shared_ptr<Context> context;
    std::shared_ptr<Worker> worker;
    std::string device; ///< empty: UCX's choice
};

/// A credit cell: one cache line of rail-0 UCX memory in which a send window receives the
/// receiver's credits (by put, or by store where the receiver can map it).
struct CreditCell {
    std::atomic<std::uint64_t>* word = nullptr;
    std::uint64_t address = 0; ///< of the cell, as the peer addresses it
    std::uint32_t chunk = 0;
    std::uint32_t index = 0;
};

/// A receive window's inbox, in UCX memory: the control block of the copy channel (its credit word
/// serves senders on the load/store path; put-path senders get credits in their cell) and, for
/// multi-rail rounds of the put path, the round whose pieces on rail r are complete. A slot's
/// `reserved` field holds the mask of those other rails.
struct Inbox {
    channel::ControlBlock block;
    alignas(channel::cache_line) std::atomic<std::uint64_t> rail_round[max_rails];
};

/// Messages between windows, as active messages. They are addressed by window id and dispatched
/// through a registry, so a message for a window that is already gone is dropped instead of
/// writing into freed memory (which a put would do).
enum class NoticeKind : std::uint32_t {
    receiver_closed = 1, ///< to a sender: no more credits; `round` != 0: answer with revoke_ack
    /// to a receiver: no more data. Sent on rail 0 and on every rail that ever carried pieces
    /// (`rails`, the mask of those above 0), each behind that rail's puts: the sender counts as
    /// closed once the notices of all of them (`rail`) have come.
    sender_closed = 2,
    revoke_ack = 3, ///< to a receiver: the sender has not started `round` and never will
    /// to a receiver: the pieces of `round` on `rail` have landed, or (rail 0, with data) the
    /// whole small message of `round` is in this message
    arrived = 4,
    sender_connected = 5, ///< to a receiver: the sender has unpacked its keys
};

struct Notice {
    std::uint64_t target = 0; ///< window id at the receiving process
    std::uint64_t from = 0;   ///< window id at the sending process
    std::uint64_t round = 0;
    std::uint64_t bytes = 0; ///< arrived on rail 0: bytes of the round
    NoticeKind kind = NoticeKind::receiver_closed;
    std::uint16_t rail = 0; ///< arrived, sender_closed: the rail this notice travelled on
    /// arrived on rail 0, sender_closed: mask of the other rails that carried pieces
    std::uint16_t rails = 0;
};

/// Bits of a send window's state word that the notice handler shares with the data path.
inline constexpr std::uint32_t writing_bit = 1; ///< the sender is putting into receiver memory
inline constexpr std::uint32_t revoked_bit = 2; ///< the receiver window is gone

class RailSet {
public:
    /// The rails of this process, created at the first call.
    /// @throws ProviderError if UCX cannot be initialised, ArgumentError for bad settings.
    static std::shared_ptr<RailSet> instance(const std::string& where);
    /// The rails if they exist (null before the first instance() and after exit began).
    static std::shared_ptr<RailSet> existing() noexcept;

    RailSet(UcxSettings settings, const std::string& where);
    RailSet(const RailSet&) = delete;
    RailSet& operator=(const RailSet&) = delete;
    ~RailSet();

    std::size_t size() const noexcept { return rails_.size(); }
    /// The endpoint of `rail` to the worker at `address`, shared by every connection to that peer:
    /// closing an endpoint may have to wait for the peer, so endpoints are closed only at exit.
    std::shared_ptr<Endpoint> endpoint(std::size_t rail, const Blob& address, bool peer_errors,
                                       const std::string& where);
    const Rail& rail(std::size_t index) const noexcept { return rails_[index]; }
    const UcxSettings& settings() const noexcept { return settings_; }
    std::uint64_t next_window_id() noexcept { return next_id_.fetch_add(1) + 1; }

    // Credit cells -------------------------------------------------------------------------------
    CreditCell acquire_cell(const std::string& where);
    /// Packed remote key of the cell's chunk.
    Blob cell_key(const CreditCell& cell) const;
    /// Returns a cell no receiver can write to any more.
    void release_cell(const CreditCell& cell) noexcept;

    // Windows the notice handler may reach ------------------------------------------------------
    void add_sender(std::uint64_t id, std::atomic<std::uint32_t>* state);
    /// `acked` and `connected` are set by revoke_ack and sender_connected notices.
    void add_receiver(std::uint64_t id, Inbox* inbox, std::atomic<bool>* acked,
                      std::atomic<bool>* connected);
    void remove(std::uint64_t id) noexcept;
    /// The send window `id` is gone but its receiver may still put credits into `cell`: keep the
    /// cell until the receiver says it closed.
    void retire(std::uint64_t id, const CreditCell& cell) noexcept;
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

    // Library-owned memory
    // --------------------------------------------------------------------------
    void* allocate(std::size_t bytes, const std::string& where);
    void deallocate(void* pointer) noexcept;
    /// The allocation containing [pointer, pointer + bytes), or null.
    std::shared_ptr<MemoryHandle> allocation(const void* pointer, std::size_t bytes) const;

private:
    struct Link {
        enum class Role : std::uint8_t { sender, receiver, retired } role = Role::sender;
        std::atomic<std::uint32_t>* sender_state = nullptr;
        Inbox* inbox = nullptr;
        std::atomic<bool>* acked = nullptr;
        std::atomic<bool>* connected = nullptr;
        std::uint32_t closed_rails = 0; ///< receiver: rails whose sender_closed notice came
        CreditCell cell;
    };
    struct Chunk {
        MemoryHandle memory;
        Blob key;
    };

    static ucs_status_t on_notice(void* arg, const void* header, std::size_t header_length,
                                  void* data, std::size_t length, const ucp_am_recv_param_t* param);
    void handle(const Notice& notice, const void* data, std::size_t bytes, ucp_ep_h reply_endpoint);
    void release_cell_locked(const CreditCell& cell) noexcept;
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
    std::mutex endpoints_mutex_;
    std::vector<std::map<Blob, std::shared_ptr<Endpoint>>> endpoints_; ///< per rail, by address
    std::atomic<std::uint64_t> next_id_{0};

    mutable std::mutex mutex_; // links_, chunks_, free_cells_, graveyard_, allocations_
    std::map<std::uint64_t, Link> links_;
    std::vector<Chunk> chunks_;
    std::vector<CreditCell> free_cells_;
    std::vector<std::shared_ptr<MemoryHandle>> graveyard_;
    std::map<std::uintptr_t, std::shared_ptr<MemoryHandle>> allocations_;

    std::mutex notices_mutex_; // notices_; never held while UCX runs (its handlers post notices)
    std::list<NoticeInFlight> notices_;
};

} // namespace pmr::detail::ucx
