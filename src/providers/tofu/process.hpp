// SPDX-License-Identifier: MIT
// Process-wide state of the tofu provider: the emulated node of this process (its TNIs, command
// queues and notices), the peers' nodes it has reached, registered memory, the credit cells of
// send windows, library-owned memory, and the notices between windows (puts with a remote notice
// whose edata and piggyback carry a rails::Notice, dispatched through the rails registry).
#pragma once

#include "base/blob.hpp"
#include "base/shared_memory.hpp"
#include "providers/tofu/emulated/node.hpp"
#include "providers/tofu/topology.hpp"
#include "rails/cell_pool.hpp"
#include "rails/kept_memory.hpp"
#include "rails/process_base.hpp"
#include "rails/protocol.hpp"
#include "rails/registry.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace pmr::detail::tofu {

using rails::CreditCell;
using rails::Notice;

/// The settings of the tofu provider, read once: the timing model (and the TNIs of the node), and
/// the rails of a connection (PMR_TOFU_RAILS / PMR_RAILS, at most the TNIs; default all TNIs).
struct TofuSettings {
    ModelParameters model;
    std::size_t rails = 0;
    /// PMR_TOFU_DEVICES / PMR_DEVICES (tni0, tni3, ...): the TNIs of rails 0, 1, ... of every
    /// connection; empty: rails start at a TNI that rotates over connections.
    std::vector<std::size_t> devices;
    /// PMR_TOFU_QUEUE_DEPTH: commands per TNI queue whose completion was not polled (default 64).
    std::size_t queue_depth = 64;
};

/// The settings of this process, read at the first call. @throws ArgumentError.
const TofuSettings& tofu_settings();

/// Registered memory: a registration and, for memory the provider allocated, its memory file.
class Memory {
public:
    Memory(std::shared_ptr<SharedMapping> storage, RegisteredRegion region) noexcept
        : storage_(std::move(storage)), region_(std::move(region)) {}
    std::byte* data() const noexcept { return region_.data(); }
    std::size_t size() const noexcept { return region_.size(); }
    const RegisteredRegion& region() const noexcept { return region_; }
    /// Where the memory lies in its memory file (fd -1: none).
    MemoryLocation location() const noexcept {
        return {region_.key().fd, static_cast<std::size_t>(region_.key().file_offset)};
    }

private:
    std::shared_ptr<SharedMapping> storage_;
    RegisteredRegion region_;
};

/// A peer's memory as one rail reaches it.
struct RemoteKey {
    std::shared_ptr<RemoteNode> node;
    std::size_t tni = 0; ///< the peer's TNI that notices of this rail go to
    std::shared_ptr<RemoteRegion> region;
    /// Never mapped for loads and stores: the provider only puts.
    std::byte* pointer(std::uint64_t /*address*/) const noexcept { return nullptr; }
};

class TofuProcess;

/// A command on one TNI's queue: done once its completion was polled.
class Request {
public:
    Request() noexcept = default;
    Request(TofuProcess* process, std::size_t tni, std::uint64_t cookie) noexcept
        : process_(process), tni_(tni), cookie_(cookie) {}
    bool pending() const noexcept;
    /// Progresses the node; true when complete. @throws PeerLost / ProviderError if it failed.
    bool done(const char* call, const std::string& where);

private:
    TofuProcess* process_ = nullptr;
    std::size_t tni_ = 0;
    std::uint64_t cookie_ = 0;
};

/// A peer node as this process reaches it: its notice queues and its landing region (a small
/// registered region that zero-byte puts carrying notices address).
struct Peer {
    std::shared_ptr<RemoteNode> node;
    std::shared_ptr<RemoteRegion> landing;
};

/// The state of this process (instance(): @throws ProviderError, ArgumentError).
class TofuProcess : public rails::ProcessBase<TofuProcess, Memory> {
public:
    TofuProcess(const TofuSettings& settings, const std::string& where);
    ~TofuProcess();

    std::size_t tnis() const noexcept { return node_->tnis(); }
    const TofuSettings& settings() const noexcept { return settings_; }
    Node& node() noexcept { return *node_; }
    rails::Registry& registry() noexcept { return registry_; }
    /// Where this node sits in the 6D torus: the placement a virtual-torus Communicator fixed, or
    /// else the default placement of this process's rank in MPI_COMM_WORLD (fixed at the first
    /// call). @throws ArgumentError for a bad PMR_TOFU_SHAPE / PMR_TOFU_FAULTY.
    const tofu_topology::Placement& placement() const;
    /// What a peer needs to reach this node (its address, landing region and 6D coordinates).
    Blob hello() const;
    /// The peer whose hello is `hello` (cached by node id). @throws ProviderError, PeerLost.
    Peer peer(const Blob& hello, const std::string& where);
    /// A TNI to start the rails of the next connection at, rotating over the TNIs.
    std::size_t next_first_tni() noexcept;

    // Data path (thread-safe) ---------------------------------------------------------------------
    /// Puts `bytes` (split at the Tofu limit) to `address` of `key`; waits while the queue is
    /// busy. @throws ProviderError outside the registered region, Timeout after PMR_TIMEOUT.
    Request put(std::size_t tni, const RemoteKey& key, const void* source, std::size_t bytes,
                std::uint64_t address, const std::string& where);
    /// Two small puts on one TNI, issued together (one lock, one publication of what is due),
    /// the second landing after the first: a round's slot and its sequence word, whose issue
    /// times the model counts from. Falls back to two put() calls where they do not fit a
    /// command each or the queue lacks room for both. @returns the requests of both.
    std::pair<Request, Request> put_pair(std::size_t tni, const RemoteKey& key, const void* first,
                                         std::size_t first_bytes, std::uint64_t first_address,
                                         const void* second, std::size_t second_bytes,
                                         std::uint64_t second_address, const std::string& where);
    /// Sends `notice` to `peer`'s TNI `remote_tni`, landing after everything issued to that peer
    /// so far (without the model: lands everything now; with it, the engine lands what nobody
    /// polls for).
    void notify(std::size_t tni, const Peer& peer, std::size_t remote_tni, const Notice& notice,
                bool reply, const std::string& where);
    /// Executes what is due on every TNI, reaps completions and dispatches notices.
    void progress() noexcept;
    bool completed(std::size_t tni, std::uint64_t cookie) const noexcept;
    /// @throws PeerLost / ProviderError if that command failed.
    void check(std::size_t tni, std::uint64_t cookie, const char* call, const std::string& where);

    // Memory --------------------------------------------------------------------------------------
    /// Registered memory of `bytes` in a new memory file, zeroed.
    std::shared_ptr<Memory> allocate_memory(std::size_t bytes, const std::string& where);
    /// Registers existing memory (pmr memory is found in its memory file).
    std::shared_ptr<Memory> register_memory(void* address, std::size_t bytes,
                                            const std::string& where);
    CreditCell acquire_cell(const std::string& where);
    Blob cell_key(const CreditCell& cell) const;
    /// Library-owned window memory (a memory file registered with the node).
    void* allocate_window(std::size_t bytes, const std::string& where);

private:
    friend class rails::ProcessBase<TofuProcess, Memory>;
    static std::shared_ptr<TofuProcess> create(const std::string& where);

    /// The emulated hardware: with the timing model on, a thread lands every command at its
    /// modelled time whether or not a caller polls (a sender may report its put complete and
    /// stop polling, or be descheduled); callers that poll land them as well.
    void engine() noexcept;
    /// Wakes the engine if it sleeps until a put (call with engine_mutex_ held, after the put).
    void wake_engine() noexcept;
    /// Publishes in the node's segment when its next command is due; returns it.
    std::int64_t publish_due_locked() noexcept;
    void progress_locked() noexcept;
    void dispatch(std::size_t tni, const RemoteNotice& notice) noexcept;
    void notify_locked(std::size_t tni, const Peer& peer, std::size_t remote_tni,
                       const Notice& notice, bool reply);
    void drain_locked() noexcept;

    TofuSettings settings_;
    std::shared_ptr<Node> node_;
    SharedMapping landing_memory_;
    RegisteredRegion landing_;
    rails::Registry registry_;
    mutable std::once_flag placement_once_;
    mutable tofu_topology::Placement placement_;

    mutable std::mutex engine_mutex_;      // queues, notices, completions, peers_
    std::vector<std::uint64_t> completed_; ///< per TNI: the highest cookie polled
    std::map<std::pair<std::size_t, std::uint64_t>, int> failures_;
    std::map<std::uint64_t, Peer> peers_; ///< by node id
    std::size_t rotation_ = 0;
    /// The last poll time published in the node's segment (progress_locked).
    std::int64_t polled_published_ = 0;
    /// The engine waits for a put to wake it (set under engine_mutex_). The engine sleeps on the
    /// node's futex word (Node::engine_sleep), where peers can wake it too.
    std::atomic<bool> engine_asleep_{false};
    std::atomic<bool> engine_stop_{false};
    std::thread engine_thread_; ///< only with the model on

    rails::CellPool<std::shared_ptr<Memory>> cells_;
    rails::KeptMemory<Memory> kept_;
};

/// A rails::Notice as edata (kind, rail, reply) and 32 B of piggyback, and back.
void encode_notice(const Notice& notice, bool reply, std::uint8_t& edata,
                   std::array<std::byte, piggyback_capacity>& piggyback) noexcept;
bool decode_notice(const RemoteNotice& remote, Notice& notice, bool& reply) noexcept;

} // namespace pmr::detail::tofu
