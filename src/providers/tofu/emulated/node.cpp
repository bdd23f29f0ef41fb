// SPDX-License-Identifier: MIT
#include "providers/tofu/emulated/node.hpp"

#include "base/error.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <limits>
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>
#include <utility>

namespace pmr::detail::tofu {

// -------------------------------------------------------------------------------------------------
// The shared segment of a node: a header, then per TNI a notice queue (many producers, the node
// as the one consumer): a ticket counter producers claim entries with, the consumer's position,
// and the entries, each published by its sequence word.
// -------------------------------------------------------------------------------------------------

namespace {

constexpr std::uint64_t segment_magic = 0x70'6d'72'74'6f'66'75'33ULL; // "pmrtofu3"
constexpr std::size_t line = 64;
/// How long a poll waits for the command behind one that landed (ns, real time).
constexpr std::int64_t spin_ns = 2000;

struct alignas(line) NoticeEntry {
    std::atomic<std::uint64_t> sequence{0}; ///< ticket + 1 once written
    RemoteNotice notice;
};
static_assert(sizeof(NoticeEntry) == 2 * line);

struct NoticeQueue {
    alignas(line) std::atomic<std::uint64_t> tail{0}; ///< next ticket
    alignas(line) std::atomic<std::uint64_t> head{0}; ///< next entry the node polls
};

struct SegmentHeader {
    std::uint64_t magic = segment_magic;
    std::uint64_t node = 0;
    std::uint64_t entries = 0;
    std::uint32_t tnis = 0;
    std::int32_t pid = 0;
    /// The earliest modelled landing of a command of this node that has not landed (now_ns()
    /// time; the largest value if none), and when a caller last progressed its queues: a peer
    /// that finds the first passed and the second older wakes the node's engine.
    alignas(line) std::atomic<std::int64_t> due{std::numeric_limits<std::int64_t>::max()};
    std::atomic<std::int64_t> polled{0};
    /// The futex word the node's engine sleeps on; bumped to wake it.
    alignas(line) std::atomic<std::uint32_t> engine_word{0};
    /// Notices delivered to the node on all TNIs, bumped after each is published: the node looks
    /// at its queues only when this differs from the number it has polled.
    alignas(line) std::atomic<std::uint64_t> notices{0};
};

constexpr std::size_t header_bytes = 256;
static_assert(sizeof(SegmentHeader) <= header_bytes);
static_assert(std::atomic<std::int64_t>::is_always_lock_free &&
              std::atomic<std::uint32_t>::is_always_lock_free);

/// Shared futexes (the word lies in a memory file other processes map).
void futex_wake(std::atomic<std::uint32_t>& word) noexcept {
    (void)syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAKE, 1, nullptr,
                  nullptr, 0);
}

std::size_t queue_bytes(std::size_t entries) {
    return sizeof(NoticeQueue) + entries * sizeof(NoticeEntry);
}

NoticeQueue& notice_queue(std::byte* segment, std::size_t entries, std::size_t tni) {
    return *reinterpret_cast<NoticeQueue*>(segment + header_bytes + tni * queue_bytes(entries));
}

NoticeEntry& notice_entry(NoticeQueue& queue, std::size_t entries, std::uint64_t ticket) {
    auto* first =
        reinterpret_cast<NoticeEntry*>(reinterpret_cast<std::byte*>(&queue) + sizeof(NoticeQueue));
    return first[ticket % entries];
}

std::atomic<std::uint64_t> node_counter{0};

} // namespace

// -------------------------------------------------------------------------------------------------
// Regions
// -------------------------------------------------------------------------------------------------

RegisteredRegion::RegisteredRegion(RegisteredRegion&& other) noexcept
    : node_(std::move(other.node_)), key_(other.key_) {
    other.key_ = {};
}

RegisteredRegion& RegisteredRegion::operator=(RegisteredRegion&& other) noexcept {
    if (this != &other) {
        if (node_) {
            node_->deregister(key_.stadd);
        }
        node_ = std::move(other.node_);
        key_ = other.key_;
        other.key_ = {};
    }
    return *this;
}

RegisteredRegion::~RegisteredRegion() {
    if (node_) {
        node_->deregister(key_.stadd);
    }
}

RemoteRegion::RemoteRegion(const RegionKey& key, const std::string& where) : key_(key) {
    if (key.stadd % stadd_alignment != 0 || key.bytes == 0) {
        raise<ProviderError>("a region key with Stadd " + std::to_string(key.stadd) + " and " +
                                 std::to_string(key.bytes) + " B",
                             where, "Are both sides running the same pmr version?");
    }
    if (key.fd >= 0) {
        mapping_ = std::make_shared<SharedMapping>(
            SharedMapping::open(key.pid, key.fd, key.file_offset, key.bytes, where.c_str()));
    }
}

std::int64_t RemoteRegion::offset_of(Stadd stadd, std::size_t bytes) const noexcept {
    if (stadd < key_.stadd) {
        return -1;
    }
    const std::uint64_t offset = stadd - key_.stadd;
    if (offset > key_.bytes || bytes > key_.bytes - offset) {
        return -1;
    }
    return static_cast<std::int64_t>(offset);
}

// -------------------------------------------------------------------------------------------------
// Nodes
// -------------------------------------------------------------------------------------------------

std::shared_ptr<Node> Node::create(const NodeOptions& options, const std::string& where) {
    return std::shared_ptr<Node>(new Node(options, where)); // NOLINT: private constructor
}

Node::Node(const NodeOptions& options, const std::string& where) : model_(options.model) {
    const std::size_t tnis = options.model.tnis;
    const std::size_t entries = std::max<std::size_t>(options.notice_entries, 2);
    const std::size_t bytes = header_bytes + tnis * queue_bytes(entries);
    segment_ = SharedMapping::create(bytes, where.c_str());
    auto* header = new (segment_.data()) SegmentHeader();
    header->node = (static_cast<std::uint64_t>(getpid()) << 20U) | (node_counter.fetch_add(1) + 1);
    header->entries = entries;
    header->tnis = static_cast<std::uint32_t>(tnis);
    header->pid = static_cast<std::int32_t>(getpid());
    for (std::size_t t = 0; t < tnis; ++t) {
        std::byte* q = segment_.data() + header_bytes + t * queue_bytes(entries);
        auto* queue = new (q) NoticeQueue();
        for (std::size_t e = 0; e < entries; ++e) {
            new (&notice_entry(*queue, entries, e)) NoticeEntry();
        }
    }
    address_.node = header->node;
    address_.segment_bytes = bytes;
    address_.pid = header->pid;
    address_.fd = segment_.fd();
    address_.tnis = header->tnis;
    for (std::size_t t = 0; t < tnis; ++t) {
        queues_.push_back(std::make_unique<CommandQueue>(*this, t, options.queue_depth));
    }
}

Node::~Node() {
    for (auto& queue : queues_) {
        queue->drain();
    }
}

RegisteredRegion Node::register_memory(void* address, std::size_t bytes, MemoryLocation location) {
    if (address == nullptr || bytes == 0) {
        raise<ArgumentError>("registration of an empty memory range",
                             "tofu node " + std::to_string(id()));
    }
    RegisteredRegion region;
    region.node_ = shared_from_this();
    std::lock_guard<std::mutex> lock(regions_mutex_);
    RegionKey& key = region.key_;
    key.node = id();
    key.stadd = next_stadd_;
    key.address = reinterpret_cast<std::uintptr_t>(address);
    key.bytes = bytes;
    key.fd = location.fd;
    key.file_offset = location.offset;
    key.pid = address_.pid;
    // Consecutive registrations never share a Stadd range: a put past the end of one region is
    // caught instead of landing in the next.
    next_stadd_ +=
        (bytes + stadd_alignment - 1) / stadd_alignment * stadd_alignment + stadd_alignment;
    regions_[key.stadd] = key;
    return region;
}

void Node::deregister(Stadd stadd) noexcept {
    std::lock_guard<std::mutex> lock(regions_mutex_);
    regions_.erase(stadd);
}

bool Node::poll_notice(std::size_t tni, RemoteNotice& notice) noexcept {
    auto* header = reinterpret_cast<SegmentHeader*>(segment_.data());
    NoticeQueue& queue = notice_queue(segment_.data(), header->entries, tni);
    const std::uint64_t head = queue.head.load(std::memory_order_relaxed);
    NoticeEntry& entry = notice_entry(queue, header->entries, head);
    if (entry.sequence.load(std::memory_order_acquire) != head + 1) {
        return false;
    }
    notice = entry.notice;
    queue.head.store(head + 1, std::memory_order_release);
    polled_notices_.store(polled_notices_.load(std::memory_order_relaxed) + 1,
                          std::memory_order_relaxed);
    return true;
}

namespace {
SegmentHeader& header_of(const SharedMapping& segment) noexcept {
    return *reinterpret_cast<SegmentHeader*>(segment.data());
}
} // namespace

void Node::set_polled(std::int64_t now) noexcept {
    header_of(segment_).polled.store(now, std::memory_order_release);
}

std::int64_t Node::polled() const noexcept {
    return header_of(segment_).polled.load(std::memory_order_acquire);
}

void Node::set_due(std::int64_t due) noexcept {
    std::atomic<std::int64_t>& word = header_of(segment_).due;
    if (word.load(std::memory_order_relaxed) != due) {
        word.store(due, std::memory_order_release);
    }
}

std::uint32_t Node::engine_word() const noexcept {
    return header_of(segment_).engine_word.load(std::memory_order_acquire);
}

void Node::engine_sleep(std::uint32_t seen, std::int64_t until) const noexcept {
    std::atomic<std::uint32_t>& word = header_of(segment_).engine_word;
    if (until == std::numeric_limits<std::int64_t>::max()) {
        (void)syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAIT, seen, nullptr,
                      nullptr, 0);
        return;
    }
    timespec deadline{};
    deadline.tv_sec = static_cast<time_t>(until / 1000000000);
    deadline.tv_nsec = static_cast<long>(until % 1000000000);
    // Absolute CLOCK_MONOTONIC time, the clock of now_ns().
    (void)syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAIT_BITSET, seen,
                  &deadline, nullptr, FUTEX_BITSET_MATCH_ANY);
}

void Node::wake_engine() noexcept {
    std::atomic<std::uint32_t>& word = header_of(segment_).engine_word;
    word.fetch_add(1, std::memory_order_acq_rel);
    futex_wake(word);
}

bool RemoteNode::wake_if_overdue(std::int64_t now, std::int64_t slack) noexcept {
    SegmentHeader& header = header_of(segment_);
    const std::int64_t due = header.due.load(std::memory_order_acquire);
    if (due > now - slack || due == kicked_due_ ||
        header.polled.load(std::memory_order_acquire) >= due) {
        return false;
    }
    kicked_due_ = due;
    header.engine_word.fetch_add(1, std::memory_order_acq_rel);
    futex_wake(header.engine_word);
    return true;
}

bool Node::notice_waiting() const noexcept {
    return reinterpret_cast<const SegmentHeader*>(segment_.data())
               ->notices.load(std::memory_order_acquire) !=
           polled_notices_.load(std::memory_order_relaxed);
}

RemoteNode::RemoteNode(const NodeAddress& address, const std::string& where) : address_(address) {
    segment_ =
        SharedMapping::open(address.pid, address.fd, 0, address.segment_bytes, where.c_str());
    const auto* header = reinterpret_cast<const SegmentHeader*>(segment_.data());
    if (header->magic != segment_magic || header->node != address.node ||
        header->tnis != address.tnis || header->entries < 2 ||
        header_bytes + header->tnis * queue_bytes(header->entries) != address.segment_bytes) {
        raise<ProviderError>("the memory of Tofu node " + std::to_string(address.node) +
                                 " is not an emulated node of this pmr version",
                             where, "Run every rank with the same pmr build.");
    }
}

bool RemoteNode::deliver(std::size_t tni, const RemoteNotice& notice) noexcept {
    auto* header = reinterpret_cast<SegmentHeader*>(segment_.data());
    NoticeQueue& queue = notice_queue(segment_.data(), header->entries, tni);
    std::uint64_t ticket = queue.tail.load(std::memory_order_relaxed);
    do {
        if (ticket - queue.head.load(std::memory_order_acquire) >= header->entries) {
            return false; // full: the command waits until the node has polled
        }
    } while (!queue.tail.compare_exchange_weak(ticket, ticket + 1, std::memory_order_acq_rel,
                                               std::memory_order_relaxed));
    NoticeEntry& entry = notice_entry(queue, header->entries, ticket);
    entry.notice = notice;
    entry.sequence.store(ticket + 1, std::memory_order_release);
    header->notices.fetch_add(1, std::memory_order_acq_rel);
    return true;
}

// -------------------------------------------------------------------------------------------------
// Command queues
// -------------------------------------------------------------------------------------------------

CommandQueue::CommandQueue(Node& node, std::size_t tni, std::size_t depth)
    : node_(node), tni_(tni), depth_(std::max<std::size_t>(depth, 1)) {}

CommandQueue::Command CommandQueue::command_on(const std::shared_ptr<RemoteNode>& node,
                                               const RemoteRegion& region, std::int64_t offset,
                                               std::size_t bytes) {
    Command c;
    c.node = node;
    c.region = region.key();
    c.mapping = region.mapping();
    c.mapped = region.mapped();
    c.offset = static_cast<std::uint64_t>(offset);
    c.bytes = bytes;
    return c;
}

Status CommandQueue::put(const std::shared_ptr<RemoteNode>& node, std::size_t target_tni,
                         const RemoteRegion& target, Stadd stadd, const void* source,
                         std::size_t bytes, const PutFlags& flags, std::uint64_t& cookie) {
    const std::int64_t offset = checked_offset(node, target_tni, target, stadd, bytes, flags);
    if (commands_.size() - reported_ >= depth_) {
        return Status::busy;
    }
    Command c = command_on(node, target, offset, bytes);
    c.target_tni = target_tni;
    c.flags = flags;
    if (flags.inline_source) {
        // Read from the command itself when it executes (it moves into the queue first).
        if (bytes > 0) {
            std::memcpy(c.inline_data.data(), source, bytes);
        }
    } else {
        c.source = static_cast<const std::byte*>(source);
    }
    if (flags.piggyback_bytes > 0) {
        std::memcpy(c.piggyback.data(), flags.piggyback, flags.piggyback_bytes);
    }
    c.flags.piggyback = nullptr;
    cookie = next_cookie_;
    return issue(std::move(c));
}

bool CommandQueue::put_at_once(const std::shared_ptr<RemoteNode>& node, const RemoteRegion& target,
                               Stadd stadd, const void* source, std::size_t bytes, int& error) {
    const std::int64_t offset = checked_offset(node, 0, target, stadd, bytes, PutFlags{});
    return put_at_once_checked(target, static_cast<std::uint64_t>(offset), source, bytes, error);
}

bool CommandQueue::put_at_once_checked(const RemoteRegion& target, std::uint64_t offset,
                                       const void* source, std::size_t bytes, int& error) noexcept {
    if (node_.model().enabled() || !idle()) {
        return false; // modelled, or behind commands it must not overtake
    }
    error = 0;
    if (bytes == 0) {
        return true;
    }
    if (target.mapped() != nullptr) {
        std::memcpy(target.mapped() + offset, source, bytes);
        return true;
    }
    iovec local{const_cast<void*>(source), bytes}; // NOLINT(cppcoreguidelines-pro-type-const-cast)
    const std::uint64_t remote = target.key().address + offset;
    iovec far{reinterpret_cast<void*>(remote), bytes}; // NOLINT(performance-no-int-to-ptr)
    const ssize_t done = process_vm_writev(target.key().pid, &local, 1, &far, 1, 0);
    if (done != static_cast<ssize_t>(bytes)) {
        error = done < 0 ? errno : EIO;
    }
    return true;
}

std::string CommandQueue::where() const {
    // Built only for a message: puts are the data path.
    return "tofu node " + std::to_string(node_.id()) + ", TNI " + std::to_string(tni_);
}

void CommandQueue::check_bytes(std::size_t bytes, const char* operation) const {
    if (bytes > max_put_bytes) {
        raise<SizeError>(std::string("a ") + operation + " of " + std::to_string(bytes) +
                             " B exceeds the Tofu limit of " + std::to_string(max_put_bytes) + " B",
                         where(), std::string("Split it into several ") + operation + "s.");
    }
}

std::int64_t CommandQueue::checked_offset(const std::shared_ptr<RemoteNode>& node,
                                          std::size_t target_tni, const RemoteRegion& target,
                                          Stadd stadd, std::size_t bytes,
                                          const PutFlags& flags) const {
    check_bytes(bytes, "put");
    if (flags.inline_source && bytes > piggyback_capacity) {
        raise<SizeError>("an inline put of " + std::to_string(bytes) + " B exceeds " +
                             std::to_string(piggyback_capacity) + " B",
                         where(), "Put larger data from registered memory.");
    }
    if (flags.piggyback_bytes > piggyback_capacity ||
        (flags.piggyback_bytes > 0 && !flags.remote_notice)) {
        raise<SizeError>("a piggyback value of " + std::to_string(flags.piggyback_bytes) +
                             " B (at most " + std::to_string(piggyback_capacity) +
                             " B, and only with a remote notice)",
                         where());
    }
    if (!node || target_tni >= node->tnis()) {
        raise<ArgumentError>("a put to TNI " + std::to_string(target_tni) + " of a node with " +
                                 std::to_string(node ? node->tnis() : 0) + " TNIs",
                             where());
    }
    const std::int64_t offset = target.offset_of(stadd, bytes);
    if (offset < 0 || target.key().node != node->address().node) {
        raise<ArgumentError>("a put of " + std::to_string(bytes) + " B to Stadd " +
                                 std::to_string(stadd) + " outside the region at Stadd " +
                                 std::to_string(target.key().stadd) + " (" +
                                 std::to_string(target.key().bytes) + " B)",
                             where());
    }
    return offset;
}

Status CommandQueue::get(const std::shared_ptr<RemoteNode>& node, const RemoteRegion& source,
                         Stadd stadd, void* destination, std::size_t bytes, std::uint64_t& cookie) {
    check_bytes(bytes, "get");
    const std::int64_t offset = source.offset_of(stadd, bytes);
    if (!node || offset < 0) {
        raise<ArgumentError>("a get of " + std::to_string(bytes) + " B from Stadd " +
                                 std::to_string(stadd) + " outside the region",
                             where());
    }
    if (commands_.size() - reported_ >= depth_) {
        return Status::busy;
    }
    Command c = command_on(node, source, offset, bytes);
    c.is_get = true;
    c.destination = static_cast<std::byte*>(destination);
    cookie = next_cookie_;
    return issue(std::move(c));
}

Status CommandQueue::issue(Command&& command) {
    command.cookie = next_cookie_++;
    command.serial = node_.take_serial();
    const std::int64_t now = now_ns();
    command.times = node_.model().schedule(tni_, command.bytes, command.node->hops, now);
    if (command.is_get) {
        // The request travels first, the data comes back: one more latency.
        command.times.land += command.times.land - command.times.done;
    }
    if (node_.model().enabled()) {
        command.times.land = std::max(command.times.land, command.flags.not_before);
    }
    commands_.push_back(std::move(command));
    queued_.store(commands_.size(), std::memory_order_release);
    node_.queued_.fetch_add(1, std::memory_order_acq_rel);
    if (!node_.model().enabled()) {
        run(false); // lands now
    }
    // With the model nothing of this command is due yet, and what earlier commands have due
    // the caller's next poll lands (running the queue here cost every put ~250 instructions,
    // and the sequence word behind a slot was issued that much later).
    return Status::ok;
}

bool CommandQueue::execute(Command& c, std::int64_t now, bool ignore_model) noexcept {
    if (c.finished) {
        return true;
    }
    std::size_t due = c.bytes;
    if (!ignore_model && node_.model().enabled() && now < c.times.land) {
        // Data lands progressively over the transfer time before `land`, in 4 KiB steps.
        const std::int64_t transfer = c.times.done - c.times.start;
        const std::int64_t first = c.times.land - transfer;
        if (now <= first || transfer <= 0) {
            return false;
        }
        const double fraction = static_cast<double>(now - first) / static_cast<double>(transfer);
        due = std::min(c.bytes, static_cast<std::size_t>(fraction * static_cast<double>(c.bytes)) /
                                    4096 * 4096);
    }
    if (due > c.moved && c.error == 0) {
        const std::byte* from = c.flags.inline_source ? c.inline_data.data() + c.moved
                                : c.staging.empty()   ? c.source + c.moved
                                                    : c.staging.data() + (c.moved - c.staged_from);
        const std::size_t n = due - c.moved;
        const std::uint64_t remote = c.region.address + c.offset + c.moved;
        if (c.mapped != nullptr) {
            std::byte* mapped = c.mapped + c.offset + c.moved;
            if (c.is_get) {
                std::memcpy(c.destination + c.moved, mapped, n);
            } else {
                std::memcpy(mapped, from, n);
            }
        } else {
            iovec local{c.is_get ? static_cast<void*>(c.destination + c.moved)
                                 : const_cast<std::byte*>(from), // NOLINT
                        n};
            iovec far{reinterpret_cast<void*>(remote), n}; // NOLINT(performance-no-int-to-ptr)
            const ssize_t done = c.is_get ? process_vm_readv(c.region.pid, &local, 1, &far, 1, 0)
                                          : process_vm_writev(c.region.pid, &local, 1, &far, 1, 0);
            if (done != static_cast<ssize_t>(n)) {
                c.error = done < 0 ? errno : EIO;
            }
        }
        c.moved = due;
    }
    if (c.moved < c.bytes && c.error == 0) {
        return false;
    }
    if (!ignore_model && node_.model().enabled() && now < c.times.land) {
        return false;
    }
    if (!ignore_model && c.flags.after_earlier) {
        for (std::size_t t = 0; t < node_.tnis(); ++t) {
            if (t != tni_ && node_.queue(t).pending_before(c.node->address().node, c.serial)) {
                return false;
            }
        }
    }
    if (!c.is_get && c.flags.remote_notice && c.error == 0) {
        RemoteNotice notice;
        notice.source = node_.id();
        notice.source_tni = static_cast<std::uint32_t>(tni_);
        notice.stadd = c.region.stadd + c.offset;
        notice.bytes = c.bytes;
        notice.edata = c.flags.edata;
        notice.piggyback_bytes = static_cast<std::uint8_t>(c.flags.piggyback_bytes);
        notice.piggyback = c.piggyback;
        // The data is in place: the notice may be seen now (the release store of deliver()
        // orders the copy above before it).
        if (!c.node->deliver(c.target_tni, notice)) {
            return false;
        }
    }
    c.finished = true;
    return true;
}

void CommandQueue::run(bool ignore_model) noexcept {
    if (commands_.empty()) {
        return;
    }
    std::int64_t now = node_.model().enabled() ? now_ns() : 0;
    const std::int64_t spin_until = now + spin_ns;
    bool landed = false;
    for (Command& c : commands_) {
        // In order: a command lands only after the ones issued before it on this TNI.
        const bool was_finished = c.finished;
        if (execute(c, now, ignore_model)) {
            landed = landed || !was_finished;
            continue;
        }
        // The command right behind one that just landed (the sequence word behind its slot, the
        // notice behind its data) is due within a few microseconds: wait for it here rather than
        // in a yield that may cost a time slice. Nothing landed: return, and let the caller do
        // what else it has to (a post that spun here for the last round's credit to land issued
        // its own puts a latency late: 8 B one-way 2.7 us instead of 1.5 with the k model).
        if (ignore_model || !landed || c.finished || c.times.land > spin_until) {
            break;
        }
        while (now < c.times.land) {
            now = now_ns();
        }
        if (!execute(c, now, ignore_model)) {
            break;
        }
    }
    retire();
}

void CommandQueue::retire() noexcept {
    while (reported_ > 0 && commands_.front().finished) {
        commands_.pop_front();
        queued_.store(commands_.size(), std::memory_order_release);
        node_.queued_.fetch_sub(1, std::memory_order_acq_rel);
        --reported_;
    }
}

bool CommandQueue::stage(Command& c) noexcept {
    if (c.is_get || c.flags.inline_source || c.moved >= c.bytes || c.error != 0 ||
        !c.staging.empty()) {
        return true;
    }
    try {
        c.staging.assign(c.source + c.moved, c.source + c.bytes);
    } catch (...) { // out of memory: complete when it has landed
        return false;
    }
    c.staged_from = c.moved;
    return true;
}

std::int64_t CommandQueue::pending_land(std::uint64_t node) const noexcept {
    std::int64_t last = 0;
    for (const Command& c : commands_) {
        if (!c.finished && c.node->address().node == node) {
            last = std::max(last, c.times.land);
        }
    }
    return last;
}

bool CommandQueue::pending_before(std::uint64_t node, std::uint64_t serial) const noexcept {
    return std::any_of(commands_.begin(), commands_.end(), [&](const Command& c) {
        return !c.finished && c.serial < serial && c.node->address().node == node;
    });
}

std::int64_t CommandQueue::next_due() const noexcept {
    for (const Command& c : commands_) {
        if (c.finished) {
            continue;
        }
        if (!node_.model().enabled()) {
            return 0; // held up by a full notice queue: retry
        }
        const std::int64_t transfer = c.times.done - c.times.start;
        if (c.moved < c.bytes && transfer > 0) {
            // The next eighth of the data (execute() moves what is due when it runs).
            const std::size_t step = std::max<std::size_t>(c.bytes / 8, 4096);
            const double next =
                std::min(1.0, static_cast<double>(c.moved + step) / static_cast<double>(c.bytes));
            return std::min(c.times.land,
                            c.times.land - transfer +
                                static_cast<std::int64_t>(next * static_cast<double>(transfer)));
        }
        return c.times.land;
    }
    return std::numeric_limits<std::int64_t>::max();
}

std::int64_t CommandQueue::next_event() const noexcept {
    std::int64_t next = next_due();
    if (reported_ < commands_.size()) {
        const Command& c = commands_[reported_];
        if (c.finished) {
            return 0; // reportable now
        }
        if (!c.is_get) {
            next = std::min(next, c.times.done); // a get completes when it lands: next_due()
        }
    }
    return next;
}

void CommandQueue::progress() {
    run(false);
}

void CommandQueue::drain() {
    // The peer's notice queue may be full for a while; give it bounded time.
    for (int attempt = 0; attempt < 100000 && !commands_.empty(); ++attempt) {
        run(true);
        if (std::all_of(commands_.begin(), commands_.end(),
                        [](const Command& c) { return c.finished; })) {
            return;
        }
        sched_yield();
    }
}

bool CommandQueue::poll(Completion& completion) {
    run(false);
    if (reported_ >= commands_.size()) {
        return false;
    }
    Command& c = commands_[reported_];
    if (!c.finished) {
        // A put completes locally once the TNI has read its source (the model's `done`); a get
        // when its data is here.
        if (c.is_get || !node_.model().enabled() || now_ns() < c.times.done || !stage(c)) {
            return false;
        }
    }
    completion.cookie = c.cookie;
    completion.error = c.error;
    ++reported_;
    retire();
    return true;
}

// -------------------------------------------------------------------------------------------------

void put_region_key(BlobWriter& writer, const RegionKey& key) {
    writer.put(key);
}

RegionKey get_region_key(BlobReader& reader) {
    return reader.get<RegionKey>();
}

} // namespace pmr::detail::tofu
