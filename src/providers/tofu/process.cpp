// SPDX-License-Identifier: MIT
#include "providers/tofu/process.hpp"

#include "base/backoff.hpp"
#include "base/error.hpp"
#include "bootstrap/mpi_process.hpp"
#include "bootstrap/setup_link.hpp"
#include "rails/process_holder.hpp"
#include "rails/settings.hpp"

#include <pmr/settings.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <utility>

namespace pmr::detail::tofu {
namespace {

constexpr std::uint32_t hello_version = 2;
constexpr std::size_t cells_per_chunk = 64;
constexpr std::size_t landing_bytes = 256;
constexpr std::int64_t never_due = std::numeric_limits<std::int64_t>::max();

std::string check_device(const std::string& name) {
    if (name.size() < 4 || name.compare(0, 3, "tni") != 0 ||
        name.find_first_not_of("0123456789", 3) != std::string::npos) {
        return "not a TNI (tni0, tni1, ...)";
    }
    return {};
}

TofuSettings read_settings() {
    TofuSettings s;
    s.model = read_model_parameters();
    const rails::RailSettings r = rails::read_rail_settings("tofu", s.model.tnis, &check_device);
    if (!r.devices.empty()) {
        // Named TNIs: their number is what counts (the emulated TNIs are alike).
        for (const std::string& device : r.devices) {
            s.devices.push_back(std::stoul(device.substr(3)));
            if (s.devices.back() >= s.model.tnis) {
                raise<ArgumentError>(
                    "PMR_TOFU_DEVICES / PMR_DEVICES names " + device + " but the node has " +
                        std::to_string(s.model.tnis) + " TNIs",
                    "tofu settings", "Name tni0 to tni" + std::to_string(s.model.tnis - 1) + ".");
            }
        }
    }
    s.rails = r.explicit_count || !r.devices.empty() ? r.rails : s.model.tnis;
    s.queue_depth = static_cast<std::size_t>(*settings::integer("PMR_TOFU_QUEUE_DEPTH"));
    return s;
}

// Linux's EEVDF scheduler (6.6 and later) lets a woken thread preempt a running one only once
// that one has used its time slice (0.7-3 ms) unless the woken one asks for a shorter slice: the
// engine runs for microseconds, and when it is woken because a caller stopped polling, every
// core is often busy with spinning waits (pmr's, MPI's). A slice of 100 us (the shortest
// allowed) lets it in at once. Older kernels ignore the request (or refuse it: then nothing
// changes).
void request_short_slice() noexcept {
    struct Attributes { // struct sched_attr of the sched_setattr(2) manual page
        std::uint32_t size;
        std::uint32_t policy;
        std::uint64_t flags;
        std::int32_t nice;
        std::uint32_t priority;
        std::uint64_t runtime;
        std::uint64_t deadline;
        std::uint64_t period;
    };
    Attributes attributes{};
    attributes.size = sizeof attributes;
    attributes.policy = SCHED_OTHER;
    attributes.nice = getpriority(PRIO_PROCESS, 0);
    attributes.runtime = 100000; // ns
    (void)syscall(SYS_sched_setattr, 0, &attributes, 0U);
}

} // namespace

const TofuSettings& tofu_settings() {
    static const TofuSettings s = read_settings();
    return s;
}

// -------------------------------------------------------------------------------------------------
// Notices as edata and piggyback: edata = kind (3 bits) | rail (4 bits) << 3 | reply << 7;
// piggyback = target, from, round, bytes (48 bits) | rails (16 bits) << 48.
// -------------------------------------------------------------------------------------------------

void encode_notice(const Notice& notice, bool reply, std::uint8_t& edata,
                   std::array<std::byte, piggyback_capacity>& piggyback) noexcept {
    edata = static_cast<std::uint8_t>((static_cast<std::uint32_t>(notice.kind) & 7U) |
                                      ((notice.rail & 15U) << 3U) | (reply ? 128U : 0U));
    const std::uint64_t words[4] = {notice.target, notice.from, notice.round,
                                    (notice.bytes & ((std::uint64_t{1} << 48U) - 1)) |
                                        (static_cast<std::uint64_t>(notice.rails) << 48U)};
    static_assert(sizeof words == piggyback_capacity);
    std::memcpy(piggyback.data(), words, sizeof words);
}

bool decode_notice(const RemoteNotice& remote, Notice& notice, bool& reply) noexcept {
    const std::uint32_t kind = remote.edata & 7U;
    if (remote.piggyback_bytes != piggyback_capacity || kind == 0 || kind > 5) {
        return false;
    }
    std::uint64_t words[4];
    std::memcpy(words, remote.piggyback.data(), sizeof words);
    notice.target = words[0];
    notice.from = words[1];
    notice.round = words[2];
    notice.bytes = words[3] & ((std::uint64_t{1} << 48U) - 1);
    notice.rails = static_cast<std::uint16_t>(words[3] >> 48U);
    notice.kind = static_cast<rails::NoticeKind>(kind);
    notice.rail = static_cast<std::uint16_t>((remote.edata >> 3U) & 15U);
    reply = (remote.edata & 128U) != 0;
    return true;
}

// -------------------------------------------------------------------------------------------------
// Requests
// -------------------------------------------------------------------------------------------------

bool Request::pending() const noexcept {
    return process_ != nullptr && !process_->completed(tni_, cookie_);
}

bool Request::done(const char* call, const std::string& where) {
    if (process_ == nullptr) {
        return true;
    }
    if (!process_->completed(tni_, cookie_)) {
        process_->progress();
        if (!process_->completed(tni_, cookie_)) {
            return false;
        }
    }
    TofuProcess* process = std::exchange(process_, nullptr);
    process->check(tni_, cookie_, call, where);
    return true;
}

// -------------------------------------------------------------------------------------------------
// The process
// -------------------------------------------------------------------------------------------------

std::shared_ptr<TofuProcess> TofuProcess::create(const std::string& where) {
    return std::make_shared<TofuProcess>(tofu_settings(), where);
}

TofuProcess::TofuProcess(const TofuSettings& settings, const std::string& where)
    : settings_(settings), cells_(registry_, cells_per_chunk) {
    NodeOptions options;
    options.model = settings.model;
    options.queue_depth = settings.queue_depth;
    node_ = Node::create(options, where);
    landing_memory_ = SharedMapping::create(landing_bytes, where.c_str());
    landing_ =
        node_->register_memory(landing_memory_.data(), landing_bytes, {landing_memory_.fd(), 0});
    completed_.assign(node_->tnis(), 0);
    if (settings.model.enabled) {
        engine_thread_ = std::thread([this] { engine(); });
    }
    debug_log("tofu: emulated node " + std::to_string(node_->id()) + " with " +
              std::to_string(node_->tnis()) + " TNIs, timing model " + settings.model.name);
}

TofuProcess::~TofuProcess() {
    if (engine_thread_.joinable()) {
        engine_stop_.store(true, std::memory_order_release);
        node_->wake_engine();
        engine_thread_.join();
    }
    std::lock_guard<std::mutex> lock(engine_mutex_);
    drain_locked();
}

void TofuProcess::wake_engine() noexcept {
    if (engine_asleep_.load(std::memory_order_acquire)) {
        engine_asleep_.store(false, std::memory_order_release);
        node_->wake_engine();
    }
}

std::int64_t TofuProcess::publish_due_locked() noexcept {
    std::int64_t next = never_due;
    for (std::size_t t = 0; t < node_->tnis(); ++t) {
        next = std::min(next, node_->queue(t).next_due());
    }
    node_->set_due(next);
    return next;
}

void TofuProcess::engine() noexcept {
    // The hardware's stand-in, and only its safety net: callers that poll land commands at their
    // modelled times. While they poll (the last poll less than `active` ago) the engine neither
    // works nor takes the queues' lock: on a machine whose cores the callers' spinning keeps
    // busy, every wake-up costs a caller its core for a while (waking every 20 us took an 8 B
    // ping-pong round from 19 to 33 us), and one that contended for the lock delayed a caller's
    // next poll, and with it the landing of its commands, by tens of microseconds. A caller that
    // stops polling with commands in flight (its send completed locally; it computes) leaves
    // them to the engine: a peer that polls for them and finds one overdue with no poll here
    // since wakes it at once (through the node's shared segment); otherwise it looks again
    // `polled_check` after the last poll. Nothing pending for `idle`: it sleeps until a put wakes
    // it (which only then costs the put a system call).
    (void)prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL); // not up to 50 us late
    request_short_slice();
    constexpr std::int64_t active = 200000;
    constexpr std::int64_t polled_check = 2000000;
    constexpr std::int64_t idle = 50000000;
    constexpr std::int64_t retry = 200000; // a full notice queue at the target
    std::int64_t idle_since = now_ns();
    bool woken = false; // by a put or a peer: work whoever polled
    while (!engine_stop_.load(std::memory_order_acquire)) {
        const std::uint32_t seen = node_->engine_word();
        std::int64_t now = now_ns();
        const std::int64_t polled = node_->polled();
        if (!woken && now - polled < active) {
            node_->engine_sleep(seen, polled + polled_check);
            woken = node_->engine_word() != seen;
            idle_since = now;
            continue;
        }
        std::int64_t next = never_due;
        bool asleep = false;
        {
            std::lock_guard<std::mutex> lock(engine_mutex_);
            for (std::size_t t = 0; t < node_->tnis(); ++t) {
                node_->queue(t).progress();
            }
            next = publish_due_locked();
            now = now_ns();
            if (next == never_due && now - idle_since >= idle) {
                // Under the queues' lock: a put issued after this sees the flag and wakes it.
                engine_asleep_.store(true, std::memory_order_release);
                asleep = true;
            }
        }
        if (asleep) {
            node_->engine_sleep(seen, never_due);
            woken = node_->engine_word() != seen;
            idle_since = now_ns();
            continue;
        }
        if (next == never_due) {
            next = now + active;
        } else {
            idle_since = now;
            if (next <= now) {
                next = now + retry;
            }
        }
        node_->engine_sleep(seen, next);
        woken = node_->engine_word() != seen;
    }
}

const tofu_topology::Placement& TofuProcess::placement() const {
    std::call_once(placement_once_, [this] {
        tofu_topology::Placement fixed;
        if (!tofu_topology::fixed_placement(fixed)) {
            int rank = 0;
            int size = 1;
            bootstrap::world_position(rank, size);
            fixed = tofu_topology::fix_placement(tofu_topology::default_placement(rank, size));
        }
        placement_ = fixed;
        debug_log("tofu: node " + std::to_string(node_->id()) + " at " +
                  tofu_topology::format(placement_.node) + " of shape " +
                  tofu_topology::format(placement_.shape) + " (" + placement_.origin + ")");
    });
    return placement_;
}

Blob TofuProcess::hello() const {
    const auto& place = placement();
    BlobWriter w;
    w.put(hello_version).put(node_->address());
    put_region_key(w, landing_.key());
    for (int extent : place.shape.xyz) {
        w.put(static_cast<std::int32_t>(extent));
    }
    for (int coordinate : place.node) {
        w.put(static_cast<std::int32_t>(coordinate));
    }
    return w.take();
}

Peer TofuProcess::peer(const Blob& hello, const std::string& where) {
    BlobReader reader(hello, where);
    if (reader.get<std::uint32_t>() != hello_version) {
        raise<ProviderError>("the peer's tofu provider speaks another set-up version", where,
                             "Link every rank against the same pmr version.");
    }
    const auto address = reader.get<NodeAddress>();
    const RegionKey landing = get_region_key(reader);
    tofu_topology::Shape shape;
    for (int& extent : shape.xyz) {
        extent = reader.get<std::int32_t>();
    }
    tofu_topology::Node coordinates{};
    for (int& coordinate : coordinates) {
        coordinate = reader.get<std::int32_t>();
    }
    reader.finish();
    if (landing.node != address.node) {
        reader.malformed("the landing region belongs to another node");
    }
    const auto& own = placement();
    if (shape != own.shape || !shape.contains(coordinates)) {
        raise<ProviderError>("the peer's node " + tofu_topology::format(coordinates) +
                                 " lies in shape " + tofu_topology::format(shape) +
                                 ", this node's in " + tofu_topology::format(own.shape),
                             where,
                             "Give every rank the same PMR_TOFU_SHAPE and PMR_TOFU_FAULTY, and "
                             "create virtual-torus communicators on all ranks alike.");
    }
    std::lock_guard<std::mutex> lock(engine_mutex_);
    auto it = peers_.find(address.node);
    if (it != peers_.end()) {
        return it->second;
    }
    Peer p;
    p.node = std::make_shared<RemoteNode>(address, where);
    p.node->hops = tofu_topology::hops(own.shape, own.node, coordinates);
    p.landing = std::make_shared<RemoteRegion>(landing, where);
    peers_[address.node] = p;
    return p;
}

std::size_t TofuProcess::next_first_tni() noexcept {
    std::lock_guard<std::mutex> lock(engine_mutex_);
    return rotation_++ % node_->tnis();
}

namespace {
/// The steering address of [address, address + bytes) in the region of `key`.
/// @throws ProviderError if the range leaves the region.
Stadd checked_stadd(const RemoteKey& key, std::size_t bytes, std::uint64_t address,
                    const std::string& where) {
    const RegionKey& region = key.region->key();
    if (address < region.address || address - region.address > region.bytes ||
        bytes > region.bytes - (address - region.address)) {
        raise<ProviderError>("a put of " + std::to_string(bytes) + " B at " +
                                 std::to_string(address) + " outside the registered region of " +
                                 std::to_string(region.bytes) + " B at " +
                                 std::to_string(region.address),
                             where);
    }
    return region.stadd + (address - region.address);
}
} // namespace

std::pair<Request, Request> TofuProcess::put_pair(std::size_t tni, const RemoteKey& key,
                                                  const void* first, std::size_t first_bytes,
                                                  std::uint64_t first_address, const void* second,
                                                  std::size_t second_bytes,
                                                  std::uint64_t second_address,
                                                  const std::string& where) {
    if (settings_.model.enabled && first_bytes <= piggyback_capacity &&
        second_bytes <= piggyback_capacity) {
        const Stadd first_stadd = checked_stadd(key, first_bytes, first_address, where);
        const Stadd second_stadd = checked_stadd(key, second_bytes, second_address, where);
        PutFlags flags;
        flags.inline_source = true; // both travel in their commands
        std::lock_guard<std::mutex> lock(engine_mutex_);
        CommandQueue& queue = node_->queue(tni);
        if (queue.outstanding() + 2 <= queue.depth()) {
            std::uint64_t first_cookie = 0;
            std::uint64_t second_cookie = 0;
            // Room for both: neither answers busy.
            (void)queue.put(key.node, key.tni, *key.region, first_stadd, first, first_bytes, flags,
                            first_cookie);
            (void)queue.put(key.node, key.tni, *key.region, second_stadd, second, second_bytes,
                            flags, second_cookie);
            (void)publish_due_locked();
            wake_engine();
            return {Request{this, tni, first_cookie}, Request{this, tni, second_cookie}};
        }
    }
    const Request a = put(tni, key, first, first_bytes, first_address, where);
    return {a, put(tni, key, second, second_bytes, second_address, where)};
}

Request TofuProcess::put(std::size_t tni, const RemoteKey& key, const void* source,
                         std::size_t bytes, std::uint64_t address, const std::string& where) {
    const RegionKey& region = key.region->key();
    const Stadd stadd = checked_stadd(key, bytes, address, where);
    const auto* from = static_cast<const std::byte*>(source);
    if (!settings_.model.enabled && bytes <= max_put_bytes) {
        // No model: the put is done when it returns, with no command to poll later, and without
        // the lock (put_at_once touches no queue state; it declines while commands are queued).
        // Checked above: the range lies in the region, which unpack() found on the peer's node,
        // and it is within the Tofu limit.
        int error = 0;
        if (node_->queue(tni).put_at_once_checked(*key.region, address - region.address, from,
                                                  bytes, error)) {
            if (error == ESRCH) {
                raise<PeerLost>("the peer process exited during a put", where);
            }
            if (error != 0) {
                raise_system("put", error, where,
                             "The emulated TNI could not reach the peer's memory.");
            }
            return {};
        }
    }
    std::uint64_t cookie = 0;
    std::size_t offset = 0;
    std::unique_ptr<Backoff> backoff; // only once the queue was busy
    do {
        const std::size_t piece = std::min(bytes - offset, max_put_bytes);
        PutFlags flags;
        // Small values travel in the command (uTofu's piggyback puts need no registered source).
        flags.inline_source = piece <= piggyback_capacity;
        Status status = Status::busy;
        {
            std::lock_guard<std::mutex> lock(engine_mutex_);
            status = node_->queue(tni).put(key.node, key.tni, *key.region, stadd + offset,
                                           from + offset, piece, flags, cookie);
            if (status == Status::busy) {
                progress_locked();
            } else {
                (void)publish_due_locked();
                wake_engine();
            }
        }
        if (status == Status::ok) {
            offset += piece;
            continue;
        }
        if (!backoff) {
            backoff = std::make_unique<Backoff>();
        }
        if (backoff->pause() && backoff->expired()) {
            raise<Timeout>("the command queue of TNI " + std::to_string(tni) +
                               " stayed full for PMR_TIMEOUT",
                           where, "Is the peer polling its notices (waiting on its windows)?");
        }
    } while (offset < bytes);
    return {this, tni, cookie};
}

void TofuProcess::notify(std::size_t tni, const Peer& peer, std::size_t remote_tni,
                         const Notice& notice, bool reply, const std::string& where) {
    std::lock_guard<std::mutex> lock(engine_mutex_);
    try {
        notify_locked(tni, peer, remote_tni, notice, reply);
    } catch (const Error& e) {
        raise<ProviderError>(std::string("a notice could not be sent: ") + e.what(), where);
    }
}

void TofuProcess::notify_locked(std::size_t tni, const Peer& peer, std::size_t remote_tni,
                                const Notice& notice, bool reply) {
    // Behind everything this process issued to that node, on every TNI: the notice must not
    // overtake puts of earlier rounds, whichever rail they took. With the model on it lands no
    // earlier than they do (and the engine lands it if nobody polls); puts to other nodes keep
    // their modelled times. Without the model everything lands now.
    const bool modelled = engine_thread_.joinable();
    PutFlags flags;
    if (modelled) {
        flags.after_earlier = true;
        for (std::size_t t = 0; t < node_->tnis(); ++t) {
            flags.not_before =
                std::max(flags.not_before, node_->queue(t).pending_land(peer.node->address().node));
        }
    } else {
        drain_locked();
    }
    flags.remote_notice = true;
    std::array<std::byte, piggyback_capacity> piggyback{};
    encode_notice(notice, reply, flags.edata, piggyback);
    flags.piggyback = piggyback.data();
    flags.piggyback_bytes = piggyback.size();
    std::uint64_t cookie = 0;
    CommandQueue& queue = node_->queue(tni);
    for (int attempt = 0;
         queue.put(peer.node, remote_tni % peer.node->tnis(), *peer.landing,
                   peer.landing->key().stadd, nullptr, 0, flags, cookie) == Status::busy;
         ++attempt) {
        progress_locked();
        if (attempt > 1000000) {
            raise<ProviderError>("the command queue of TNI " + std::to_string(tni) + " stayed full",
                                 "tofu notice");
        }
    }
    if (!modelled) {
        drain_locked();
    } else {
        (void)publish_due_locked();
        wake_engine();
    }
}

void TofuProcess::drain_locked() noexcept {
    for (std::size_t t = 0; t < node_->tnis(); ++t) {
        node_->queue(t).drain();
    }
    progress_locked();
}

void TofuProcess::progress() noexcept {
    if (!settings_.model.enabled && node_->idle() && !node_->notice_waiting()) {
        // No model: puts are done when they return, so only queued commands (notices held up
        // by a full notice queue at their target) and arrived notices need the lock.
        return;
    }
    std::lock_guard<std::mutex> lock(engine_mutex_);
    progress_locked();
}

void TofuProcess::progress_locked() noexcept {
    const bool modelled = engine_thread_.joinable();
    std::int64_t now = 0;
    if (modelled) {
        now = now_ns();
        // Peers read the poll time beside the node's next due time (one cache line) in every
        // poll of theirs; stored at every poll it bounced that line between the cores each
        // time. Its readers allow 2 us of slack (wake_if_overdue) or far more (the engine).
        constexpr std::int64_t publish_every = 500;
        if (now - polled_published_ >= publish_every) {
            polled_published_ = now;
            node_->set_polled(now);
        }
    }
    bool ran = false; // some queue ran: what is due next may have changed
    for (std::size_t t = 0; t < node_->tnis(); ++t) {
        CommandQueue& queue = node_->queue(t);
        if (queue.outstanding() == 0 && queue.next_due() == never_due) {
            continue;
        }
        if (modelled && queue.next_event() > now) {
            // Nothing lands and nothing completes yet: a waiting caller polls in a loop, and
            // running the queue every time made each turn of it several hundred instructions
            // long, the lag of every landing and every notice.
            continue;
        }
        ran = true;
        Completion c;
        while (queue.poll(c)) {
            completed_[t] = c.cookie;
            if (c.error != 0) {
                try {
                    failures_[{t, c.cookie}] = c.error;
                } catch (...) { // NOLINT(bugprone-empty-catch): out of memory, error lost
                }
            }
        }
    }
    if (modelled) {
        if (ran) {
            (void)publish_due_locked(); // puts publish their own
        }
        // A peer whose caller stopped polling leaves its commands to its engine, which would
        // look only a while later: wake it once one is overdue (2 us: a polling caller is due).
        constexpr std::int64_t slack = 2000;
        for (auto& entry : peers_) {
            (void)entry.second.node->wake_if_overdue(now, slack);
        }
    }
    if (!node_->notice_waiting()) {
        return; // one counter in the node's segment, instead of every TNI's queue
    }
    for (std::size_t t = 0; t < node_->tnis(); ++t) {
        RemoteNotice notice;
        while (node_->poll_notice(t, notice)) {
            dispatch(t, notice);
        }
    }
}

void TofuProcess::dispatch(std::size_t tni, const RemoteNotice& remote) noexcept {
    Notice notice;
    bool reply = false;
    if (!decode_notice(remote, notice, reply)) {
        return; // not a notice of the rails protocol
    }
    const std::optional<Notice> answer = registry_.handle(notice, nullptr, 0);
    if (!answer || !reply) {
        return;
    }
    auto it = peers_.find(remote.source);
    if (it == peers_.end()) {
        return; // the receiver's wait for the acknowledgement is bounded
    }
    try {
        notify_locked(tni, it->second, remote.source_tni, *answer, false);
    } catch (...) { // NOLINT(bugprone-empty-catch): as for a lost acknowledgement
    }
}

bool TofuProcess::completed(std::size_t tni, std::uint64_t cookie) const noexcept {
    std::lock_guard<std::mutex> lock(engine_mutex_);
    return completed_[tni] >= cookie;
}

void TofuProcess::check(std::size_t tni, std::uint64_t cookie, const char* call,
                        const std::string& where) {
    int error = 0;
    {
        std::lock_guard<std::mutex> lock(engine_mutex_);
        auto it = failures_.find({tni, cookie});
        if (it == failures_.end()) {
            return;
        }
        error = it->second;
        failures_.erase(it);
    }
    if (error == ESRCH) {
        raise<PeerLost>(std::string("the peer process exited during a ") + call, where);
    }
    raise_system(call, error, where, "The emulated TNI could not reach the peer's memory.");
}

// -------------------------------------------------------------------------------------------------
// Memory
// -------------------------------------------------------------------------------------------------

std::shared_ptr<Memory> TofuProcess::allocate_memory(std::size_t bytes, const std::string& where) {
    auto storage = std::make_shared<SharedMapping>(
        SharedMapping::create(bytes == 0 ? 1 : bytes, where.c_str()));
    RegisteredRegion region =
        node_->register_memory(storage->data(), storage->size(), {storage->fd(), 0});
    return std::make_shared<Memory>(std::move(storage), std::move(region));
}

std::shared_ptr<Memory> TofuProcess::register_memory(void* address, std::size_t bytes,
                                                     const std::string& /*where*/) {
    MemoryLocation location = locate(address, bytes);
    if (location.fd < 0) {
        if (auto owner = allocation(address, bytes)) {
            location = owner->location();
            location.offset +=
                static_cast<std::size_t>(static_cast<std::byte*>(address) - owner->data());
        }
    }
    return std::make_shared<Memory>(nullptr, node_->register_memory(address, bytes, location));
}

CreditCell TofuProcess::acquire_cell(const std::string& where) {
    return cells_.acquire([&](std::size_t bytes) { return allocate_memory(bytes, where); }, where);
}

Blob TofuProcess::cell_key(const CreditCell& cell) const {
    return cells_.key(cell, [](const std::shared_ptr<Memory>& chunk) {
        BlobWriter w;
        put_region_key(w, chunk->region().key());
        return w.take();
    });
}

void* TofuProcess::allocate_window(std::size_t bytes, const std::string& where) {
    return keep_window(allocate_memory(bytes, where)); // memory files start zeroed
}

} // namespace pmr::detail::tofu
