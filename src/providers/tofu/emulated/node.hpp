// SPDX-License-Identifier: MIT
// The emulated Tofu interconnect: the small interface the tofu provider is written against, with
// the semantics of the low-level Tofu interface (uTofu) as its public documentation describes them,
// under pmr's own names. A port to real Tofu hardware replaces this folder only.
//
// What is emulated:
//   - Each process is one node with several TNIs (Tofu network interfaces); every TNI has one
//     command queue of a fixed depth and one queue of remote notices.
//   - Memory is registered once and named by a steering address (Stadd, 256-byte aligned); peers
//     address registered memory as Stadd + offset, after receiving its RegionKey.
//   - One-sided put (and get) through a command queue. Completion is reported twice: locally, by
//     poll() on the issuing queue, once the source has been read (it may be reused), and, if
//     asked for, remotely by a notice in the target TNI's notice queue that carries 8 bits of
//     edata and up to 32 B of piggyback value, visible only after the put's data.
//   - Limits: at most 16 MiB - 1 per put; 32 B of piggyback; a queue holding `depth` commands
//     whose completions were not polled answers Status::busy, and the caller polls and retries.
//   - The timing model (model.hpp): a command executes, and its data and notice land, at the
//     modelled time; large puts land progressively over their modelled transfer time.
//   - Local completion comes when the TNI has read the source (the model's `done`), one latency
//     before the data lands: what has not landed by then travels on from a copy the queue keeps
//     (the last latency's worth of bytes, a few KiB; all of it if nobody polled meanwhile).
// What is not: the physical medium is shared memory between processes of one machine (memory
// files, and cross-memory attach for memory that is not one); a command moves only while some
// thread polls or progresses its queue (or, without the model, when it is put): the tofu provider
// runs a thread that does so at the modelled times, standing in for the hardware that works in
// the background; sources need no registration; a put to a region that was deregistered is not
// detected; no barrier interface, no atomic operations, no cache injection, no hardware routing
// (hops come from the caller).
#pragma once

#include "base/blob.hpp"
#include "base/shared_memory.hpp"
#include "providers/tofu/emulated/model.hpp"

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <sys/types.h>
#include <vector>

namespace pmr::detail::tofu {

/// Published limits of uTofu that the emulation enforces.
inline constexpr std::size_t max_put_bytes = (std::size_t{1} << 24) - 1;
inline constexpr std::size_t piggyback_capacity = 32;
inline constexpr unsigned edata_bits = 8;
inline constexpr std::uint64_t stadd_alignment = 256;

using Stadd = std::uint64_t;

enum class Status { ok, busy };

struct NodeOptions {
    ModelParameters model;            ///< also gives the number of TNIs
    std::size_t queue_depth = 64;     ///< commands per queue whose completion was not polled
    std::size_t notice_entries = 512; ///< remote notices per TNI not yet polled by the node
};

/// Everything a peer needs to reach a registered region.
struct RegionKey {
    std::uint64_t node = 0; ///< id of the owning node
    Stadd stadd = 0;
    std::uint64_t address = 0; ///< where the region lies in the owner's address space
    std::uint64_t bytes = 0;
    std::uint64_t file_offset = 0;
    std::int32_t pid = 0;
    std::int32_t fd = -1; ///< memory file of the owner holding the region, -1: none
};

/// Everything a peer needs to reach a node.
struct NodeAddress {
    std::uint64_t node = 0;
    std::uint64_t segment_bytes = 0;
    std::int32_t pid = 0;
    std::int32_t fd = -1;
    std::uint32_t tnis = 0;
    std::uint32_t reserved = 0;
};

/// A notice as the target node polls it.
struct RemoteNotice {
    std::uint64_t source = 0;     ///< node id of the issuer
    std::uint32_t source_tni = 0; ///< TNI of the issuer
    Stadd stadd = 0;              ///< where the put wrote (region Stadd + offset)
    std::uint64_t bytes = 0;      ///< how many bytes it wrote
    std::uint8_t edata = 0;
    std::uint8_t piggyback_bytes = 0;
    std::array<std::byte, piggyback_capacity> piggyback{};
};

struct Completion {
    std::uint64_t cookie = 0;
    int error = 0; ///< errno of a failed transfer (ESRCH: the peer is gone), 0 on success
};

/// What a put asks for beyond the data.
struct PutFlags {
    bool remote_notice = false;
    std::uint8_t edata = 0;
    const void* piggyback = nullptr; ///< copied into the notice, at most piggyback_capacity
    std::size_t piggyback_bytes = 0;
    /// The source travels inside the command (at most piggyback_capacity bytes): it may be
    /// reused as soon as put() returns.
    bool inline_source = false;
    /// With the model on: lands only after every command issued before it to the same node, on
    /// any TNI of this node, has landed (and not before `not_before`, their latest modelled
    /// landing, in now_ns() time).
    bool after_earlier = false;
    std::int64_t not_before = 0;
};

class Node;
struct Segment;

/// A registration: the Stadd of a memory range, released by the destructor.
class RegisteredRegion {
public:
    RegisteredRegion() noexcept = default;
    RegisteredRegion(const RegisteredRegion&) = delete;
    RegisteredRegion& operator=(const RegisteredRegion&) = delete;
    RegisteredRegion(RegisteredRegion&& other) noexcept;
    RegisteredRegion& operator=(RegisteredRegion&& other) noexcept;
    ~RegisteredRegion();

    Stadd stadd() const noexcept { return key_.stadd; }
    std::byte* data() const noexcept {
        return reinterpret_cast<std::byte*>(key_.address); // NOLINT(performance-no-int-to-ptr)
    }
    std::size_t size() const noexcept { return static_cast<std::size_t>(key_.bytes); }
    const RegionKey& key() const noexcept { return key_; }

private:
    friend class Node;
    std::shared_ptr<Node> node_;
    RegionKey key_;
};

/// A peer's registered region as this process writes it: mapped when it lies in a memory file,
/// else reached by cross-memory attach.
class RemoteRegion {
public:
    RemoteRegion() = default;
    /// @throws ProviderError / PeerLost if the region cannot be reached.
    RemoteRegion(const RegionKey& key, const std::string& where);

    const RegionKey& key() const noexcept { return key_; }
    std::byte* mapped() const noexcept { return mapping_ ? mapping_->data() : nullptr; }
    /// The mapping behind mapped(), which commands keep alive until they have executed.
    const std::shared_ptr<SharedMapping>& mapping() const noexcept { return mapping_; }
    /// Offset of `stadd` in the region if [stadd, stadd + bytes) lies inside, else -1.
    std::int64_t offset_of(Stadd stadd, std::size_t bytes) const noexcept;

private:
    RegionKey key_;
    std::shared_ptr<SharedMapping> mapping_;
};

/// Another node (or this one): its notice queues mapped here.
class RemoteNode {
public:
    /// @throws ProviderError / PeerLost if the node's segment cannot be mapped or is malformed.
    RemoteNode(const NodeAddress& address, const std::string& where);
    const NodeAddress& address() const noexcept { return address_; }
    std::size_t tnis() const noexcept { return address_.tnis; }
    /// Links between this node and that one, for the timing model (1: a neighbour).
    int hops = 1;
    /// Wakes that node's engine if a command of it was due to land more than `slack` ns before
    /// `now` and no caller there has progressed its queues since (it stopped polling), once per
    /// such command. True if it did. Not thread-safe: one caller at a time.
    bool wake_if_overdue(std::int64_t now, std::int64_t slack) noexcept;

private:
    friend class CommandQueue;
    /// Appends a notice to the queue of `tni`; false if it is full.
    bool deliver(std::size_t tni, const RemoteNotice& notice) noexcept;

    NodeAddress address_;
    SharedMapping segment_;
    std::int64_t kicked_due_ = 0;
};

/// A growable FIFO in one array: a std::deque of Commands allocated a block for every second
/// put (a command is ~250 B), a malloc and a free on every round's data path. Iterators run from
/// the front; push_back may move the elements (none is referenced across it).
template <class T>
class Ring {
public:
    /// Forward iterator over `R` (Ring or const Ring) yielding `V&`.
    template <class R, class V>
    class BasicIterator {
    public:
        using iterator_category = std::forward_iterator_tag;
        using value_type = T;
        using difference_type = std::ptrdiff_t;
        using pointer = V*;
        using reference = V&;
        BasicIterator(R* ring, std::size_t index) : ring_(ring), index_(index) {}
        V& operator*() const { return (*ring_)[index_]; }
        V* operator->() const { return &(*ring_)[index_]; }
        BasicIterator& operator++() {
            ++index_;
            return *this;
        }
        bool operator==(const BasicIterator& other) const { return index_ == other.index_; }
        bool operator!=(const BasicIterator& other) const { return index_ != other.index_; }

    private:
        R* ring_;
        std::size_t index_;
    };
    using Iterator = BasicIterator<Ring, T>;
    using ConstIterator = BasicIterator<const Ring, const T>;

    bool empty() const noexcept { return size_ == 0; }
    std::size_t size() const noexcept { return size_; }
    T& operator[](std::size_t i) noexcept { return slots_[(head_ + i) & (slots_.size() - 1)]; }
    const T& operator[](std::size_t i) const noexcept {
        return slots_[(head_ + i) & (slots_.size() - 1)];
    }
    T& front() noexcept { return slots_[head_]; }
    void push_back(T&& value) {
        if (size_ == slots_.size()) {
            std::vector<T> grown(std::max<std::size_t>(16, 2 * slots_.size()));
            for (std::size_t i = 0; i < size_; ++i) {
                grown[i] = std::move((*this)[i]);
            }
            slots_ = std::move(grown);
            head_ = 0;
        }
        (*this)[size_] = std::move(value);
        ++size_;
    }
    /// Drops the front element (its resources are released now).
    void pop_front() noexcept {
        slots_[head_] = T{};
        head_ = (head_ + 1) & (slots_.size() - 1);
        --size_;
    }
    Iterator begin() { return {this, 0}; }
    Iterator end() { return {this, size_}; }
    ConstIterator begin() const { return {this, 0}; }
    ConstIterator end() const { return {this, size_}; }

private:
    std::vector<T> slots_; ///< a power of two in size, or empty
    std::size_t head_ = 0;
    std::size_t size_ = 0;
};

/// The command queue of one TNI. Not thread-safe: one caller at a time.
class CommandQueue {
public:
    CommandQueue(Node& node, std::size_t tni, std::size_t depth);
    CommandQueue(const CommandQueue&) = delete;
    CommandQueue& operator=(const CommandQueue&) = delete;

    /// Puts `bytes` from `source` to `target` at `stadd` (region Stadd + offset), notifying TNI
    /// `target_tni` of `node` if flags ask for it. `cookie` receives the id poll() reports.
    /// @returns Status::busy, issuing nothing, when `depth` commands await poll().
    /// @throws SizeError beyond the limits, ArgumentError outside the region or for bad flags.
    Status put(const std::shared_ptr<RemoteNode>& node, std::size_t target_tni,
               const RemoteRegion& target, Stadd stadd, const void* source, std::size_t bytes,
               const PutFlags& flags, std::uint64_t& cookie);
    /// With the model off and no command queued: puts at once, without a notice and without a
    /// completion to poll (`error`: errno of a failed transfer, 0 on success). False, doing
    /// nothing, where put() is needed. @throws as put(). Thread-safe (it touches no queue
    /// state), but it does not order itself behind commands other threads queue concurrently.
    bool put_at_once(const std::shared_ptr<RemoteNode>& node, const RemoteRegion& target,
                     Stadd stadd, const void* source, std::size_t bytes, int& error);
    /// put_at_once() for a caller that has itself checked the put against the Tofu limit and
    /// the region (it writes [offset, offset + bytes) of `target`).
    bool put_at_once_checked(const RemoteRegion& target, std::uint64_t offset, const void* source,
                             std::size_t bytes, int& error) noexcept;
    /// Reads `bytes` from `source` at `stadd` into `destination`; no remote notice.
    Status get(const std::shared_ptr<RemoteNode>& node, const RemoteRegion& source, Stadd stadd,
               void* destination, std::size_t bytes, std::uint64_t& cookie);
    /// Executes what is due and reports the oldest finished command, in issue order.
    bool poll(Completion& completion);
    /// Executes what the model says is due (data, notices).
    void progress();
    /// The latest modelled landing of a command to node `node` that has not landed yet, 0 if
    /// none.
    std::int64_t pending_land(std::uint64_t node) const noexcept;
    /// Whether a command to node `node` issued before the one numbered `serial` (node-wide
    /// issue order) has not landed yet.
    bool pending_before(std::uint64_t node, std::uint64_t serial) const noexcept;
    /// When progress() has something to do next, in now_ns() time: a past time if it is held up
    /// (the target's notice queue is full), the largest value if every command has landed.
    std::int64_t next_due() const noexcept;
    /// When poll() has something to do next: next_due() or the local completion of the oldest
    /// command not reported yet, whichever comes first (in now_ns() time, with the model on).
    std::int64_t next_event() const noexcept;
    /// Executes everything now, ignoring the model (teardown: nothing would move later).
    void drain();

    /// Commands whose completion was not polled.
    std::size_t outstanding() const noexcept { return commands_.size() - reported_; }
    /// Whether no command is queued (landed and reported commands are gone). Unlike the rest of
    /// the queue, callable from any thread: with the model off, puts that find the queue empty
    /// need not take the caller's lock (put_at_once).
    bool idle() const noexcept { return queued_.load(std::memory_order_acquire) == 0; }
    std::size_t depth() const noexcept { return depth_; }
    std::size_t tni() const noexcept { return tni_; }

private:
    struct Command {
        std::uint64_t cookie = 0;
        bool is_get = false;
        std::shared_ptr<RemoteNode> node;
        std::size_t target_tni = 0;
        RegionKey region;
        std::shared_ptr<SharedMapping> mapping; ///< target (or get source) mapped here, else CMA
        std::byte* mapped = nullptr;
        std::uint64_t offset = 0;
        const std::byte* source = nullptr;
        /// The source from byte `staged_from` on, copied at local completion.
        std::vector<std::byte> staging;
        std::size_t staged_from = 0;
        std::byte* destination = nullptr; ///< get
        std::size_t bytes = 0;
        std::size_t moved = 0;
        std::array<std::byte, piggyback_capacity> inline_data{};
        PutFlags flags;
        std::array<std::byte, piggyback_capacity> piggyback{};
        PutTimes times;
        std::uint64_t serial = 0; ///< node-wide issue order
        bool finished = false;    ///< landed (and notified)
        int error = 0;
    };

    /// A command on `bytes` at `offset` of `region` of `node`, the rest left to the caller.
    static Command command_on(const std::shared_ptr<RemoteNode>& node, const RemoteRegion& region,
                              std::int64_t offset, std::size_t bytes);
    Status issue(Command&& command);
    /// Checks a put against the limits and the region; its offset in the region.
    /// "tofu node <id>, TNI <tni>", for error messages.
    std::string where() const;
    /// @throws SizeError if `bytes` exceed what one `operation` ("put", "get") may move.
    void check_bytes(std::size_t bytes, const char* operation) const;
    std::int64_t checked_offset(const std::shared_ptr<RemoteNode>& node, std::size_t target_tni,
                                const RemoteRegion& target, Stadd stadd, std::size_t bytes,
                                const PutFlags& flags) const;
    /// Moves what is due of `c`; true once it is finished.
    bool execute(Command& c, std::int64_t now, bool ignore_model) noexcept;
    /// Lands what is due, and a command due within a few microseconds right behind one that
    /// landed in this call.
    void run(bool ignore_model) noexcept;
    /// Copies what `c` has still to land from its source; false if out of memory.
    static bool stage(Command& c) noexcept;
    /// Drops the commands at the front that have landed and were reported.
    void retire() noexcept;

    Node& node_;
    std::size_t tni_;
    std::size_t depth_;
    std::uint64_t next_cookie_ = 1;
    Ring<Command> commands_;
    std::atomic<std::size_t> queued_{0}; ///< commands_.size(), for idle()
    std::size_t reported_ = 0; ///< commands at the front of commands_ whose completion was polled
};

/// One emulated node: its TNIs' queues, its notice queues in a shared memory file, its
/// registrations and its timing model. Made by create(); shared by its regions.
class Node : public std::enable_shared_from_this<Node> {
public:
    /// @throws ProviderError if the shared segment cannot be created.
    static std::shared_ptr<Node> create(const NodeOptions& options, const std::string& where);
    Node(const Node&) = delete;
    Node& operator=(const Node&) = delete;
    ~Node();

    std::size_t tnis() const noexcept { return queues_.size(); }
    std::uint64_t id() const noexcept { return address_.node; }
    const NodeAddress& address() const noexcept { return address_; }
    CommandQueue& queue(std::size_t tni) { return *queues_.at(tni); }
    TimingModel& model() noexcept { return model_; }
    /// The next number of the node-wide issue order.
    std::uint64_t take_serial() noexcept { return next_serial_++; }

    /// Registers [address, address + bytes). `location`: the memory file holding it (peers then
    /// map it), or fd -1 (peers reach it by cross-memory attach).
    /// @throws ArgumentError for an empty or null range.
    RegisteredRegion register_memory(void* address, std::size_t bytes, MemoryLocation location);
    /// The oldest visible notice on `tni`, if any.
    bool poll_notice(std::size_t tni, RemoteNotice& notice) noexcept;
    /// Whether poll_notice() would find a notice on some TNI (callable from any thread).
    bool notice_waiting() const noexcept;
    /// Whether no command is queued on any TNI (callable from any thread).
    bool idle() const noexcept { return queued_.load(std::memory_order_acquire) == 0; }

    // The node's engine (the thread that stands in for the hardware, see the tofu provider): its
    // state lies in the shared segment, so that a peer waiting for this node's commands can wake
    // it (RemoteNode::wake_if_overdue) when no caller here polls any more.
    /// A caller progressed the queues at `now`.
    void set_polled(std::int64_t now) noexcept;
    std::int64_t polled() const noexcept;
    /// The earliest modelled landing of a command not landed yet (largest value: none).
    void set_due(std::int64_t due) noexcept;
    /// The engine's futex word: read it, check what to do, then engine_sleep() with the value.
    std::uint32_t engine_word() const noexcept;
    /// Sleeps until `until` (now_ns() time; the largest value: no limit) unless the word has
    /// changed from `seen` or changes meanwhile. May return early.
    void engine_sleep(std::uint32_t seen, std::int64_t until) const noexcept;
    /// Changes the word and wakes the engine.
    void wake_engine() noexcept;

private:
    friend class RegisteredRegion;
    Node(const NodeOptions& options, const std::string& where);
    void deregister(Stadd stadd) noexcept;

    NodeAddress address_;
    SharedMapping segment_;
    TimingModel model_;
    std::vector<std::unique_ptr<CommandQueue>> queues_;
    std::mutex regions_mutex_;
    std::map<Stadd, RegionKey> regions_;
    Stadd next_stadd_ = stadd_alignment;
    std::uint64_t next_serial_ = 1; ///< issue order over all queues (callers serialise them)
    friend class CommandQueue;
    std::atomic<std::size_t> queued_{0};           ///< commands queued on all TNIs
    std::atomic<std::uint64_t> polled_notices_{0}; ///< notices poll_notice() has returned
};

/// Encodes/decodes values in a Blob (set-up messages).
void put_region_key(BlobWriter& writer, const RegionKey& key);
RegionKey get_region_key(BlobReader& reader);

} // namespace pmr::detail::tofu
