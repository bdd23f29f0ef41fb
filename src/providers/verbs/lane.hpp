// SPDX-License-Identifier: MIT
// Process-wide state of the verbs provider (one device context, protection domain and completion
// queue per rail, the registered memory, the credit cells and the rails registry) and the lanes:
// one RC queue pair per connection and rail, with the notice ring its peer writes into.
//
// Notices (the messages between windows of rails/protocol.hpp, and the `arrived` signal that
// carries small messages whole) travel as RDMA writes with immediate into the peer's notice ring:
// the write puts the notice (and up to 232 B of message) into slot sequence % ring_slots, the
// immediate carries the sequence and the data length (wire.hpp), and the receive work request it
// consumes makes the completion that tells the peer. The receiver hands the notice to the rails
// registry, reposts receive work requests in batches of half the ring and then returns as many
// notice credits by an RDMA write into the sender's credit word; a sender never has more notices
// outstanding than the ring has slots, so a receive is always posted and no slot is overwritten
// before it is read. RC executes a queue pair's requests in order, and the receiver sees a
// completion only after the data of the writes before it was placed: a notice behind payload
// writes on the same lane publishes them (fence() has nothing to do).
//
// Send work requests are signalled selectively: those whose source must stay valid until done
// (payloads from registered memory), and every send_depth/4-th to reclaim queue slots; inline
// writes (credits, small headers, notices up to the device's inline size) complete at posting.
#pragma once

#include "base/blob.hpp"
#include "providers/verbs/native.hpp"
#include "providers/verbs/wire.hpp"
#include "rails/cell_pool.hpp"
#include "rails/kept_memory.hpp"
#include "rails/process_base.hpp"
#include "rails/registry.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace pmr::detail::verbs {

using rails::CreditCell;
using rails::Notice;

inline constexpr std::uint32_t send_depth = 128;
inline constexpr std::uint16_t ring_slots = 64;
inline constexpr std::uint32_t inline_wanted = 256;
/// A device must inline at least a credit word and a notice header.
inline constexpr std::uint32_t inline_needed = 64;

struct Rail {
    Port port;
    std::string name; ///< "mlx5_0:1"
    std::shared_ptr<Context> context;
    std::shared_ptr<ProtectionDomain> pd;
    std::shared_ptr<CompletionQueue> cq;
    int cq_entries = 0;
    std::uint16_t lid = 0;
    std::uint8_t mtu = 0;
    std::uint8_t link_layer = 0;
    bool global = false;
    int gid_index = -1;
    std::uint8_t gid[16] = {};
    std::unique_ptr<std::mutex> poll_mutex = std::make_unique<std::mutex>();
};

/// Local keys of registered memory by address, per rail: the data path looks up the key of a
/// payload's source.
class KeyTable {
public:
    explicit KeyTable(std::size_t rails) : rails_(rails) {}
    void add(std::size_t rail, const void* address, std::size_t bytes, std::uint32_t lkey);
    void remove(std::size_t rail, const void* address, std::uint32_t lkey) noexcept;
    /// The local key of registered memory holding [address, address + bytes), or nothing.
    bool find(std::size_t rail, const void* address, std::size_t bytes,
              std::uint32_t* lkey) const noexcept;

private:
    struct Entry {
        std::uintptr_t end;
        std::uint32_t lkey;
    };
    mutable std::mutex mutex_;
    std::vector<std::multimap<std::uintptr_t, Entry>> rails_;
};

/// Memory registered on one rail, allocated here (page-aligned, zeroed as asked) or the caller's.
class Memory {
public:
    /// `address` null: allocates `bytes` of zeroed, page-aligned memory, freed with the region.
    Memory(std::shared_ptr<KeyTable> keys, std::size_t rail, const Rail& on, void* address,
           std::size_t bytes, const std::string& where);
    Memory(const Memory&) = delete;
    Memory& operator=(const Memory&) = delete;
    ~Memory();

    std::byte* data() const noexcept { return data_; }
    std::size_t size() const noexcept { return bytes_; }
    RemoteRegion region() const noexcept;
    std::uint32_t lkey() const noexcept { return region_.lkey(); }

private:
    std::shared_ptr<KeyTable> keys_;
    std::size_t rail_;
    std::byte* data_;
    std::size_t bytes_;
    bool owned_;
    MemoryRegion region_;
};

class Lane;

/// A signalled work request not known to be complete yet.
class Request {
public:
    Request() noexcept = default;
    Request(std::shared_ptr<Lane> lane, std::uint64_t ticket) noexcept
        : lane_(std::move(lane)), ticket_(ticket) {}
    /// True once complete; throws PeerLost/ProviderError if the lane failed before.
    bool done(const char* call, const std::string& where);
    bool pending() const noexcept { return lane_ != nullptr; }

private:
    std::shared_ptr<Lane> lane_;
    std::uint64_t ticket_ = 0;
};

class VerbsProcess;

/// One RC queue pair of a connection on one rail, and its notice ring.
class Lane : public std::enable_shared_from_this<Lane> {
public:
    /// The queue pair in INIT with every ring slot's receive posted.
    Lane(VerbsProcess& process, std::size_t rail, const std::string& where);
    Lane(const Lane&) = delete;
    Lane& operator=(const Lane&) = delete;
    ~Lane();

    LaneAddress address() const noexcept { return local_; }
    /// RTR and RTS towards the peer's queue pair.
    void connect(const LaneAddress& peer, const std::string& where);

    /// RDMA write of `bytes` from `source` to the peer's `address` inside `region`; inline when it
    /// fits (then done at once), else from registered memory and signalled. Waits while the send
    /// queue is full.
    Request write(const void* source, std::size_t bytes, const RemoteRegion& region,
                  std::uint64_t address, const std::string& where);
    /// A notice with up to inline_capacity bytes of data, behind every earlier request of the
    /// lane. `wait`: waits for a notice credit (data path); else queues it when none is free
    /// (handlers, teardown), and progress() sends it later.
    void notice(const Notice& notice, const void* data, std::size_t bytes, bool wait,
                const std::string& where);

    /// Sends what waits for credits or queue slots. Never throws (failures mark the lane).
    void flush() noexcept;
    /// An empty write to the peer, whose failure marks the lane (a peer that is gone).
    void probe() noexcept;
    /// Polls the rail's completion queue (for every lane of the rail).
    void progress() noexcept;

    /// A completion of this lane's queue pair (called by the poller).
    void complete(const ibv_wc& completion) noexcept;

    bool failed() const noexcept { return failure_.load(std::memory_order_acquire) != 0; }
    [[noreturn]] void raise_failure(const std::string& where) const;
    bool completed(std::uint64_t ticket) const noexcept {
        return completed_.load(std::memory_order_acquire) >= ticket;
    }
    std::uint32_t qp_number() const noexcept { return qp_.number(); }
    std::size_t rail() const noexcept { return rail_; }
    const std::string& device() const noexcept;

private:
    struct Pending {
        Notice notice;
        std::vector<std::byte> data;
    };

    // With mutex_ held: whether a work request can be posted / a notice sent now.
    bool room_locked() const noexcept;
    bool notice_possible_locked() const noexcept;
    void post_locked(ibv_send_wr& request, bool signal, const std::string& where);
    void send_notice_locked(const Notice& notice, const void* data, std::size_t bytes,
                            const std::string& where);
    void return_credits_locked(const std::string& where);
    void receive(const ibv_wc& completion) noexcept;
    void repost_receives(std::uint32_t count) noexcept;
    void fail(ibv_wc_status status, const char* operation) noexcept;

    VerbsProcess& process_;
    std::size_t rail_;
    std::unique_ptr<Memory> memory_; ///< ring | staging | credit in | credit out
    QueuePair qp_;                   ///< destroyed first: no write lands in freed memory
    std::byte* ring_ = nullptr;
    std::byte* staging_ = nullptr;
    std::atomic<std::uint64_t>* credit_in_ = nullptr; ///< notices the peer has processed
    std::uint64_t* credit_out_ = nullptr;             ///< source of the credit writes
    LaneAddress local_;
    LaneAddress peer_;
    RemoteRegion peer_ring_;
    RemoteRegion peer_credit_;
    bool connected_ = false;

    std::mutex mutex_; // the send side below
    std::uint64_t posted_ = 0;
    std::uint32_t unsignalled_ = 0;
    std::uint64_t notices_sent_ = 0;
    std::deque<Pending> outbox_;
    bool credit_due_ = false;
    std::atomic<std::uint64_t> completed_{0};

    // Receive side: only the poller (under the rail's poll mutex) touches it.
    std::uint64_t notices_received_ = 0;
    std::uint64_t receives_returned_ = 0; ///< reposted, and the credits written back
    std::atomic<std::uint64_t> credits_to_return_{0};

    std::atomic<int> failure_{0}; ///< the first failed completion's ibv_wc_status
    const char* failed_operation_ = "";
};

/// The verbs settings of this process, read at the first call. @throws ArgumentError.
const VerbsSettings& verbs_settings();

/// The rails of this process, opened at the first call to instance().
/// @throws ProviderError (instance()) if no RDMA device (or not the one named) is found.
class VerbsProcess : public rails::ProcessBase<VerbsProcess, Memory> {
public:
    VerbsProcess(const VerbsSettings& settings, const std::string& where);
    ~VerbsProcess();

    std::size_t size() const noexcept { return rails_.size(); }
    const Rail& rail(std::size_t index) const noexcept { return rails_[index]; }
    const std::shared_ptr<KeyTable>& keys() const noexcept { return keys_; }
    rails::Registry& registry() noexcept { return registry_; }

    /// Polls the completion queue of `rail` and hands each completion to its lane.
    void poll(std::size_t rail) noexcept;
    void add_lane(const std::shared_ptr<Lane>& lane);
    void remove_lane(std::size_t rail, std::uint32_t qp_number) noexcept;

    CreditCell acquire_cell(const std::string& where);
    Blob cell_key(const CreditCell& cell) const;

    /// Zeroed memory registered on `rail`.
    std::shared_ptr<Memory> allocate(std::size_t rail, std::size_t bytes, const std::string& where);
    std::shared_ptr<Memory> map(std::size_t rail, void* address, std::size_t bytes,
                                const std::string& where);

    /// Library-owned window memory (rail 0, registered at allocation).
    void* allocate_window(std::size_t bytes, const std::string& where);

private:
    friend class rails::ProcessBase<VerbsProcess, Memory>;
    static std::shared_ptr<VerbsProcess> create(const std::string& where);

    std::vector<Rail> rails_;
    std::shared_ptr<KeyTable> keys_;
    rails::Registry registry_;

    std::mutex lanes_mutex_;
    std::vector<std::unordered_map<std::uint32_t, std::weak_ptr<Lane>>> lanes_; ///< by QP number

    rails::CellPool<std::shared_ptr<Memory>> cells_;
    rails::KeptMemory<Memory> kept_;
};

} // namespace pmr::detail::verbs
