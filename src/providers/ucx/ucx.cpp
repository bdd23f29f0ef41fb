// SPDX-License-Identifier: MIT
#include "providers/ucx/ucx.hpp"

#include "core/backoff.hpp"
#include "core/environment.hpp"
#include "core/error.hpp"
#include "providers/common/copy_sender.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <new>
#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <utility>

namespace pmr::detail {

using ucx::RailSet;

namespace {

constexpr std::uint32_t hello_version = 1;

/// Value of a credit cell whose receive window is gone; never a round number.
constexpr std::uint64_t revoked_credit = ~std::uint64_t{0};

/// What the put path writes of a slot before its sequence word: bytes, delivery, then data.
constexpr std::size_t slot_header_offset = offsetof(channel::Slot, bytes);
constexpr std::size_t slot_header_bytes = offsetof(channel::Slot, data) - slot_header_offset;

std::uint64_t slot_address(std::uint64_t inbox, std::uint64_t round) {
    return inbox + offsetof(ucx::Inbox, block) + offsetof(channel::ControlBlock, slots) +
           (round % channel::slot_count) * sizeof(channel::Slot);
}

/// A receive window as its sender reads it, followed by the packed keys of the inbox and of the
/// buffer on every rail.
struct RecvDescription {
    std::uint64_t id;
    std::uint64_t inbox;
    std::uint64_t staging; ///< staging area behind the inbox, 0 if none
    std::uint64_t buffer;
    std::uint64_t bytes;
    std::uint64_t memfd_offset; ///< where the buffer lies in its pmr::allocate memory file
    std::int32_t memfd;         ///< -1: not pmr::allocate memory
    std::int32_t pid;
};

/// A send window as its receiver reads it, followed by the packed key of the credit cell.
struct SendDescription {
    std::uint64_t id;
    std::uint64_t cell;
};

bool wants_peer_errors(bool same_node) {
    switch (ucx::ucx_settings().peer_errors) {
    case ucx::UcxSettings::PeerErrors::on:
        return true;
    case ucx::UcxSettings::PeerErrors::off:
        return false;
    case ucx::UcxSettings::PeerErrors::automatic:
        break;
    }
    return !same_node;
}

} // namespace

// -------------------------------------------------------------------------------------------------
// Provider-wide
// -------------------------------------------------------------------------------------------------

std::uint32_t ucx_version() noexcept {
    unsigned major = 0;
    unsigned minor = 0;
    unsigned release = 0;
    ucp_get_version(&major, &minor, &release);
    return major << 16U | minor << 8U | release;
}

std::string version_text(std::uint32_t version) {
    return std::to_string(version >> 16U) + "." + std::to_string((version >> 8U) & 0xffU) + "." +
           std::to_string(version & 0xffU);
}

Blob Ucx::hello(const ConnectionSetup& setup) {
    const auto rails = RailSet::instance(setup.where);
    BlobWriter hello;
    hello.put(hello_version).put(ucx_version()).put(static_cast<std::uint32_t>(rails->size()));
    for (std::size_t i = 0; i < rails->size(); ++i) {
        hello.put_bytes(rails->rail(i).worker->address());
    }
    return hello.take();
}

void* Ucx::allocate(std::size_t bytes, const std::string& where) {
    return RailSet::instance(where)->allocate(bytes, where);
}

void Ucx::deallocate(void* pointer) noexcept {
    if (auto rails = RailSet::existing()) {
        rails->deallocate(pointer);
    }
}

Ucx::PeerProcess::PeerProcess(pid_t pid) noexcept
    : pid_(pid), pidfd_(static_cast<int>(syscall(SYS_pidfd_open, pid, 0))) {}

Ucx::PeerProcess::PeerProcess(PeerProcess&& other) noexcept
    : pid_(other.pid_), pidfd_(std::exchange(other.pidfd_, -1)) {}

Ucx::PeerProcess& Ucx::PeerProcess::operator=(PeerProcess&& other) noexcept {
    if (this != &other) {
        if (pidfd_ >= 0) {
            close(pidfd_);
        }
        pid_ = other.pid_;
        pidfd_ = std::exchange(other.pidfd_, -1);
    }
    return *this;
}

Ucx::PeerProcess::~PeerProcess() {
    if (pidfd_ >= 0) {
        close(pidfd_);
    }
}

bool Ucx::PeerProcess::alive() const noexcept {
    if (pid_ <= 0) {
        return true;
    }
    if (pidfd_ >= 0) {
        pollfd p{pidfd_, POLLIN, 0};
        return poll(&p, 1, 0) == 0; // readable once the process has exited
    }
    return kill(pid_, 0) == 0 || errno != ESRCH;
}

// -------------------------------------------------------------------------------------------------
// Connection
// -------------------------------------------------------------------------------------------------

Ucx::Connection::Connection(const ConnectionSetup& setup, const PeerInfo& peer, const Blob& hello)
    : rails_(RailSet::instance(setup.where)), same_node_(peer.same_node), pid_(peer.pid) {
    BlobReader reader(hello);
    if (reader.get<std::uint32_t>() != hello_version) {
        raise<ProviderError>("the peer's ucx provider speaks another set-up version", setup.where,
                             "Link every rank against the same pmr version.");
    }
    // Worker addresses and remote keys are opaque UCX data that UCX does not check.
    if (const auto version = reader.get<std::uint32_t>(); version != ucx_version()) {
        raise<ProviderError>("the peer runs UCX " + version_text(version) + ", this process UCX " +
                                 version_text(ucx_version()),
                             setup.where, "Run every rank with the same UCX installation.");
    }
    const auto peer_rails = reader.get<std::uint32_t>();
    std::vector<Blob> addresses;
    for (std::uint32_t i = 0; i < peer_rails; ++i) {
        addresses.push_back(reader.get_bytes());
    }
    const std::size_t count = std::min<std::size_t>(peer_rails, rails_->size());
    if (count == 0) {
        raise<ProviderError>("the peer offers no UCX rail", setup.where,
                             "Check PMR_UCX_RAILS / PMR_UCX_DEVICES on the peer.");
    }
    const bool peer_errors = wants_peer_errors(same_node_);
    for (std::size_t i = 0; i < count; ++i) {
        endpoints_.push_back(rails_->endpoint(i, addresses[i], peer_errors,
                                              setup.where + ", UCX rail " + std::to_string(i)));
    }
    if (same_node_) {
        process_ = PeerProcess(pid_);
    }
    debug_log("ucx: " + std::to_string(count) + " rail(s) (this side " +
              std::to_string(rails_->size()) + ", peer " + std::to_string(peer_rails) +
              "), peer error handling " + (peer_errors ? "by UCX" : "by pidfd and PMR_TIMEOUT") +
              " [" + setup.where + "]");
    if (settings().debug) {
        ucp_ep_print_info(endpoints_.front()->get(), stderr);
    }
}

bool Ucx::Connection::peer_alive() {
    progress();
    for (const auto& endpoint : endpoints_) {
        if (endpoint->failure() != UCS_OK) {
            return false;
        }
    }
    return process_.alive();
}

void Ucx::Connection::progress() const noexcept {
    for (std::size_t i = 0; i < endpoints_.size(); ++i) {
        rails_->rail(i).worker->progress();
    }
}

// -------------------------------------------------------------------------------------------------
// Send window
// -------------------------------------------------------------------------------------------------

struct Ucx::SendWindow::State {
    enum class Phase : std::uint8_t {
        idle,       ///< no round pending
        credit,     ///< put path: waiting for the receiver's credit
        completing, ///< put path: everything issued; waiting until UCX no longer reads the sources
    };

    std::shared_ptr<RailSet> rails;
    const std::string* where = nullptr;
    std::uint64_t id = 0;
    ucx::CreditCell cell;
    Blob cell_key;
    /// writing_bit and revoked_bit, shared with the notice handler of rails.hpp.
    std::atomic<std::uint32_t> flags{0};
    bool released = false; ///< cell and registration already given back (discard)

    Connection* connection = nullptr;
    std::uint64_t receiver_id = 0;
    std::vector<ucx::RemoteKey> inbox_keys;  ///< one per rail
    std::vector<ucx::RemoteKey> buffer_keys; ///< one per rail
    std::uint64_t inbox_address = 0;
    std::uint64_t buffer_address = 0;

    // Load/store path: the copy channel of the shm provider on the mapped inbox.
    ucx::Inbox* mapped_inbox = nullptr;
    SharedMapping buffer_mapping; ///< the receive buffer, when it is pmr::allocate memory
    CopySender copier;

    // Put path.
    bool signal_by_message = false; ///< an active message instead of fence and sequence put
    std::uint64_t round = 0;
    Phase phase = Phase::idle;
    const std::byte* source = nullptr;
    std::size_t bytes = 0;
    std::vector<RailRange> pieces;      ///< of the current round, coalesced per rail
    std::size_t rails_used = 1;         ///< rails the round touches: 0 .. rails_used - 1
    std::uint32_t other_rails_used = 0; ///< mask of the rails above 0 that ever carried pieces
    std::vector<ucx::Request> requests;
    // Sources of the puts and messages, valid until `requests` are done.
    channel::Slot image;
    std::uint64_t sequence = 0;
    std::uint64_t rail_rounds[ucx::max_rails] = {};
    ucx::Notice signals[ucx::max_rails];

    const std::string& at() const noexcept { return *where; }
    bool load_store() const noexcept { return mapped_inbox != nullptr; }

    void begin(const std::byte* data) {
        ++round;
        source = data;
        phase = Phase::credit;
        progress();
    }

    bool progress() {
        try {
            if (phase == Phase::credit && !start()) {
                return false;
            }
            if (phase == Phase::completing) {
                if (!finished()) {
                    return false;
                }
                phase = Phase::idle;
            }
            return true;
        } catch (...) {
            end_writing();
            phase = Phase::idle;
            requests.clear();
            throw;
        }
    }

    // Issues the round once the credit of round n is there.
    bool start() {
        const std::uint64_t credit = cell.word->load(std::memory_order_acquire);
        if (credit == revoked_credit ||
            (flags.load(std::memory_order_acquire) & ucx::revoked_bit)) {
            receiver_gone();
        }
        if (credit < round) {
            // The credit lands on rail 0, but the peer may grant it only once this side has
            // progressed the others (its send to this side finished).
            connection->progress();
            return false;
        }
        // From here on UCX writes into the receiver's memory: a revocation that arrives now waits
        // for this round's signal (see the notice handler).
        if ((flags.fetch_or(ucx::writing_bit, std::memory_order_acq_rel) & ucx::revoked_bit) != 0) {
            end_writing();
            receiver_gone();
        }
        const std::uint64_t slot = slot_address(inbox_address, round);
        if (bytes > 0 && bytes <= channel::inline_capacity && signal_by_message) {
            // One active message carries a small message whole: a put costs a message of its
            // own where UCX emulates puts (TCP, user memory on one node).
            keep(RailSet::signal(*connection->endpoint(0), arrival(0, 0), source, bytes, at()));
            end_writing();
            phase = Phase::completing;
            return true;
        }
        if (bytes <= channel::inline_capacity) {
            // Slot and sequence word go to the inbox over one lane, which a fence orders.
            image.bytes = bytes;
            image.delivery = channel::Delivery::inlined;
            image.reserved = 0;
            if (bytes > 0) {
                std::memcpy(image.data, source, bytes);
            }
            keep(ucx::put(inbox_keys[0], &image.bytes, slot_header_bytes + bytes,
                          slot + slot_header_offset, at()));
            put_sequence(slot);
            return true;
        }
        std::uint16_t other_rails = 0;
        for (const RailRange& piece : pieces) {
            keep(ucx::put(buffer_keys[piece.rail], source + piece.offset, piece.bytes,
                          buffer_address + piece.offset, at()));
            if (piece.rail != 0) {
                other_rails = static_cast<std::uint16_t>(other_rails | (1U << piece.rail));
            }
        }
        other_rails_used |= other_rails;
        // Each rail signals its own pieces after them, on the same lane; rail 0 also the round.
        for (std::size_t rail = 1; rail < rails_used; ++rail) {
            if ((other_rails & (1U << rail)) == 0) {
                continue;
            }
            connection->endpoint(rail)->worker().fence(at());
            if (signal_by_message) {
                keep(RailSet::signal(*connection->endpoint(rail), arrival(rail, 0), nullptr, 0,
                                     at()));
            } else {
                rail_rounds[rail] = round;
                keep(ucx::put(inbox_keys[rail], &rail_rounds[rail], sizeof(std::uint64_t),
                              inbox_address + offsetof(ucx::Inbox, rail_round) +
                                  rail * sizeof(std::uint64_t),
                              at()));
            }
        }
        if (signal_by_message) {
            connection->endpoint(0)->worker().fence(at());
            keep(RailSet::signal(*connection->endpoint(0), arrival(0, other_rails), nullptr, 0,
                                 at()));
            end_writing();
            phase = Phase::completing;
        } else {
            image.bytes = bytes;
            image.delivery = channel::Delivery::direct;
            image.reserved = other_rails;
            keep(ucx::put(inbox_keys[0], &image.bytes, slot_header_bytes, slot + slot_header_offset,
                          at()));
            put_sequence(slot);
        }
        return true;
    }

    const ucx::Notice& arrival(std::size_t rail, std::uint16_t other_rails) {
        ucx::Notice& n = signals[rail];
        n.target = receiver_id;
        n.from = id;
        n.round = round;
        n.bytes = bytes;
        n.kind = ucx::NoticeKind::arrived;
        n.rail = static_cast<std::uint16_t>(rail);
        n.rails = other_rails;
        return n;
    }

    void put_sequence(std::uint64_t slot) {
        connection->endpoint(0)->worker().fence(at());
        sequence = round;
        keep(ucx::put(inbox_keys[0], &sequence, sizeof sequence,
                      slot + offsetof(channel::Slot, sequence), at()));
        end_writing();
        phase = Phase::completing;
    }

    bool finished() {
        if (requests.empty()) {
            return true;
        }
        connection->progress();
        auto pending = std::remove_if(requests.begin(), requests.end(),
                                      [&](ucx::Request& r) { return r.done("ucp_put_nbx", at()); });
        requests.erase(pending, requests.end());
        return requests.empty();
    }

    void keep(ucx::Request request) {
        if (request.pending()) {
            requests.push_back(std::move(request));
        }
    }

    void end_writing() noexcept { flags.fetch_and(~ucx::writing_bit, std::memory_order_acq_rel); }

    bool receiver_closed() const noexcept {
        return (flags.load(std::memory_order_acquire) & ucx::revoked_bit) != 0 ||
               cell.word->load(std::memory_order_acquire) == revoked_credit ||
               (mapped_inbox != nullptr &&
                mapped_inbox->block.credit.load(std::memory_order_acquire) ==
                    channel::revoked_credit);
    }

    [[noreturn]] void receiver_gone() const {
        raise<PeerLost>("the peer destroyed its receive window", at(),
                        "Keep windows alive until both sides have finished their last round.");
    }
};

Ucx::SendWindow::SendWindow(const WindowSpec& spec) : state_(std::make_unique<State>()) {
    State& s = *state_;
    s.where = spec.where;
    s.rails = RailSet::instance(s.at());
    s.id = s.rails->next_window_id();
    s.cell = s.rails->acquire_cell(s.at());
    s.cell_key = s.rails->cell_key(s.cell);
    try {
        s.rails->add_sender(s.id, &s.flags);
    } catch (...) {
        s.rails->release_cell(s.cell);
        throw;
    }
}

Ucx::SendWindow::SendWindow(SendWindow&& other) noexcept = default;
Ucx::SendWindow& Ucx::SendWindow::operator=(SendWindow&& other) noexcept = default;

Ucx::SendWindow::~SendWindow() {
    if (!state_ || state_->released) {
        return;
    }
    State& s = *state_;
    if (s.connection != nullptr && s.load_store()) {
        s.copier.close();
    } else if (s.connection != nullptr) {
        // Nothing was written while waiting for a credit; once puts are issued they read the
        // user's buffer and their signal must follow, so that round is finished.
        if (s.phase == State::Phase::credit) {
            s.phase = State::Phase::idle;
        }
        Backoff backoff;
        while (s.phase != State::Phase::idle) {
            try {
                s.progress();
            } catch (const std::exception&) {
                break;
            }
            if (backoff.pause() && (backoff.elapsed_seconds() > ucx::teardown_grace_seconds() ||
                                    !s.connection->peer_alive())) {
                break;
            }
        }
        if (s.phase != State::Phase::idle) {
            // UCX still reads from this state: keep it, better leaked than overwritten.
            debug_log("ucx: a send window's last puts did not complete [" + s.at() + "]");
            s.end_writing();
            s.rails->retire(s.id, s.cell);
            (void)state_.release(); // NOLINT(bugprone-unused-return-value)
            return;
        }
    }
    // The receiver must not take the sender for closed (and free its memory) while puts of the
    // last round are still on their way. A notice orders only behind the puts of its own rail, so
    // every rail that carried pieces sends one, behind a fence; the receiver waits for all of
    // them. No flush here: over TCP it completes only while the peer progresses those rails, and
    // the peer, done with its windows, may be anywhere (in MPI, creating its next window).
    if (s.connection != nullptr && !s.receiver_closed()) {
        try {
            ucx::Notice notice;
            notice.target = s.receiver_id;
            notice.from = s.id;
            notice.kind = ucx::NoticeKind::sender_closed;
            notice.rails = static_cast<std::uint16_t>(s.other_rails_used);
            for (std::size_t rail = s.connection->rails(); rail-- > 0;) {
                if (rail != 0 && (s.other_rails_used & (1U << rail)) == 0) {
                    continue;
                }
                const ucx::Endpoint& endpoint = *s.connection->endpoint(rail);
                endpoint.worker().fence(s.at());
                notice.rail = static_cast<std::uint16_t>(rail);
                s.rails->send_notice(endpoint, notice, false, s.at());
            }
        } catch (const std::exception&) { // NOLINT(bugprone-empty-catch)
            // The receiver then learns it from PMR_TIMEOUT or the peer's death.
        }
    }
    if (s.receiver_closed()) {
        s.rails->remove(s.id);
        s.rails->release_cell(s.cell);
    } else {
        // The receiver may still put a credit into the cell; it is reused once the receiver
        // tells it closed.
        s.rails->retire(s.id, s.cell);
    }
}

void Ucx::SendWindow::discard() noexcept {
    if (!state_ || state_->released) {
        return;
    }
    state_->rails->remove(state_->id);
    state_->rails->release_cell(state_->cell);
    state_->released = true;
}

Blob Ucx::SendWindow::describe() const {
    BlobWriter description;
    ucx::put_key(description, state_->cell_key);
    description.put(SendDescription{state_->id, state_->cell.address});
    return description.take();
}

void Ucx::SendWindow::connect(Connection& connection, const Blob& peer) {
    State& s = *state_;
    BlobReader reader(peer);
    const auto d = reader.get<RecvDescription>();
    const auto peer_rails = reader.get<std::uint32_t>();
    std::vector<Blob> inbox_keys;
    std::vector<Blob> buffer_keys;
    for (std::uint32_t i = 0; i < peer_rails; ++i) {
        inbox_keys.push_back(ucx::get_key(reader, "inbox", s.at()));
        buffer_keys.push_back(ucx::get_key(reader, "receive buffer", s.at()));
    }
    const std::size_t rails = std::min<std::size_t>(connection.rails(), peer_rails);
    if (rails == 0) {
        raise<ProviderError>("the peer's receive window has no UCX rail", s.at(),
                             "Are both sides running the same pmr version?");
    }
    // UCX cannot unpack the keys of a dead process's shared memory (and crashes trying).
    if (!connection.peer_alive()) {
        raise<PeerLost>("the peer process exited before its receive window was used", s.at());
    }
    s.connection = &connection;
    s.receiver_id = d.id;
    s.inbox_address = d.inbox;
    s.buffer_address = d.buffer;
    for (std::size_t rail = 0; rail < rails; ++rail) {
        s.inbox_keys.emplace_back(connection.endpoint(rail), inbox_keys[rail], "inbox", s.at());
        if (d.bytes > 0) {
            s.buffer_keys.emplace_back(connection.endpoint(rail), buffer_keys[rail],
                                       "receive buffer", s.at());
        }
    }
    // From now on the receiver may release the memory behind the keys.
    ucx::Notice connected;
    connected.target = s.receiver_id;
    connected.from = s.id;
    connected.kind = ucx::NoticeKind::sender_connected;
    s.rails->send_notice(*connection.endpoint(0), connected, false, s.at());
    switch (s.rails->settings().signal) {
    case ucx::UcxSettings::Signal::put:
        s.signal_by_message = false;
        break;
    case ucx::UcxSettings::Signal::am:
        s.signal_by_message = true;
        break;
    case ucx::UcxSettings::Signal::automatic:
        s.signal_by_message = connection.same_node();
        break;
    }
    if (s.rails->settings().load_store) {
        s.mapped_inbox = reinterpret_cast<ucx::Inbox*>(s.inbox_keys.front().pointer(d.inbox));
    }
    if (!s.load_store()) {
        debug_log(std::string("ucx: puts (up to ") + std::to_string(channel::inline_capacity) +
                  " B inline in the slot), fence and sequence put; larger messages: puts, then " +
                  (s.signal_by_message ? "an active message on the same lane"
                                       : "fence and sequence put") +
                  " [" + s.at() + "]");
        return;
    }
    // Load/store: the receiver's inbox, and its buffer where UCX (ucp_rkey_ptr) or pmr::allocate
    // (a memory file) lets this process map it; a user buffer through cross-memory attach or the
    // staging area behind the inbox, as the shm provider does.
    CopyTarget target;
    target.control = &s.mapped_inbox->block;
    if (d.bytes > 0) {
        target.mapped = s.buffer_keys.front().pointer(d.buffer);
    }
    if (target.mapped == nullptr && d.memfd >= 0 && d.bytes > 0) {
        try {
            s.buffer_mapping =
                SharedMapping::open(d.pid, d.memfd, d.memfd_offset, d.bytes, s.at().c_str());
            target.mapped = s.buffer_mapping.data();
        } catch (const Error& e) {
            debug_log(std::string("ucx: pmr memory of the peer not mapped: ") + e.what());
        }
    }
    if (d.staging != 0) {
        target.staging = s.inbox_keys.front().pointer(d.staging);
    }
    target.remote_address = d.buffer;
    target.pid = d.pid;
    target.cma = settings().shm_cma;
    target.cma_threshold = settings().shm_cma_threshold;
    s.copier.attach(target, s.where);
    debug_log(std::string("ucx: load/store through ucp_rkey_ptr: ") +
              (target.mapped != nullptr ? "memcpy into the mapped receive buffer"
               : target.cma             ? "cross-memory attach above PMR_SHM_CMA_THRESHOLD, "
                                          "staging below"
                                        : "staging copies") +
              ", inline up to " + std::to_string(channel::inline_capacity) + " B [" + s.at() + "]");
}

void Ucx::SendWindow::post(const std::byte* data, std::size_t bytes) {
    State& s = *state_;
    if (s.load_store()) {
        s.copier.post(data, bytes);
        return;
    }
    s.pieces.assign(1, RailRange{0, bytes, 0});
    s.rails_used = 1;
    s.bytes = bytes;
    s.begin(data);
}

void Ucx::SendWindow::post(const std::byte* data, const RailRange* ranges, std::size_t count) {
    State& s = *state_;
    const std::size_t bytes = count > 0 ? ranges[count - 1].offset + ranges[count - 1].bytes : 0;
    if (s.load_store()) {
        s.copier.post(data, bytes); // one copy; rails mean network devices
        return;
    }
    s.pieces.clear();
    s.rails_used = 1;
    s.bytes = bytes;
    for (std::size_t i = 0; i < count; ++i) {
        const RailRange& r = ranges[i];
        if (r.bytes == 0) {
            continue;
        }
        s.rails_used = std::max(s.rails_used, r.rail + 1);
        if (!s.pieces.empty() && s.pieces.back().rail == r.rail) {
            s.pieces.back().bytes += r.bytes; // the core checked that the pieces are contiguous
        } else {
            s.pieces.push_back(r);
        }
    }
    s.begin(data);
}

bool Ucx::SendWindow::test() {
    State& s = *state_;
    return s.load_store() ? s.copier.progress() : s.progress();
}

bool Ucx::SendWindow::peer_gone() const noexcept {
    return state_->receiver_closed();
}

// -------------------------------------------------------------------------------------------------
// Receive window
// -------------------------------------------------------------------------------------------------

struct Ucx::RecvWindow::State {
    std::shared_ptr<RailSet> rails;
    const std::string* where = nullptr;
    std::uint64_t id = 0;
    std::shared_ptr<ucx::MemoryHandle> inbox_memory; ///< rail 0, allocated by UCX
    std::vector<std::shared_ptr<ucx::MemoryHandle>> inbox_registrations; ///< rails 1 ..
    ucx::Inbox* inbox = nullptr;
    std::byte* staging = nullptr; ///< behind the inbox, for a user buffer on the load/store path
    std::byte* buffer = nullptr;
    std::size_t bytes = 0;
    std::shared_ptr<ucx::MemoryHandle> allocation; ///< library-owned memory from Ucx::allocate
    std::vector<std::shared_ptr<ucx::MemoryHandle>> registrations; ///< the buffer on each rail
    std::vector<Blob> inbox_keys;                                  ///< per rail
    std::vector<Blob> buffer_keys;                                 ///< per rail
    MemoryLocation memfd; ///< pmr::allocate memory, which a sender on this node maps
    std::atomic<bool> acked{false};
    std::atomic<bool> sender_connected{false}; ///< the sender has unpacked this window's keys
    bool discarded = false;

    Connection* connection = nullptr;
    std::uint64_t sender_id = 0;
    ucx::RemoteKey cell_key;
    std::uint64_t cell_address = 0;
    std::atomic<std::uint64_t>* mapped_cell = nullptr; ///< credits by store when not null
    std::uint64_t credit = 0;                          ///< source of the credit put
    ucx::Request credit_request;
    bool sender_puts = true; ///< the sender is on the put path (its data lands during progress)

    std::uint64_t round = 0;
    std::size_t received = 0;

    const std::string& at() const noexcept { return *where; }

    // channel::receive(), plus the pieces of a multi-rail round.
    bool arrived() noexcept {
        channel::Slot& slot = channel::slot_of(inbox->block, round);
        if (slot.sequence.load(std::memory_order_acquire) != round) {
            return false;
        }
        for (std::uint32_t others = slot.reserved, rail = 1; others >> rail != 0; ++rail) {
            if (((others >> rail) & 1U) != 0 &&
                inbox->rail_round[rail].load(std::memory_order_acquire) != round) {
                return false;
            }
        }
        sender_connected.store(true, std::memory_order_relaxed); // it wrote, so it has the keys
        received = static_cast<std::size_t>(slot.bytes);
        if (received > 0 && slot.delivery == channel::Delivery::inlined) {
            std::memcpy(buffer, slot.data, received);
        } else if (received > 0 && slot.delivery == channel::Delivery::staged) {
            std::memcpy(buffer, staging, received);
        }
        return true;
    }

    bool sender_closed() const noexcept {
        return inbox->block.sender_closed.load(std::memory_order_acquire) != 0;
    }

    void finish_credit() {
        Backoff backoff;
        while (!credit_request.done("ucp_put_nbx (credit)", at())) {
            connection->progress();
            if (backoff.pause() && !connection->peer_alive()) {
                raise<PeerLost>("the peer process exited", at());
            }
        }
    }

    // The load/store path: withdraw the credit in the inbox; a sender that claimed it is copying
    // into the user buffer by cross-memory attach right now, which must end before it is freed.
    void revoke_mapped() noexcept {
        Backoff backoff;
        while (channel::revoke(inbox->block) != 0) {
            if (backoff.pause() && (backoff.elapsed_seconds() > ucx::teardown_grace_seconds() ||
                                    !connection->peer_alive())) {
                break;
            }
        }
    }

    // The put path: tell the sender; while a credit is out it may be putting into this memory,
    // so wait (bounded) until it acknowledges or finishes the round. False if it never answered.
    bool revoke_put(bool outstanding) {
        // Credits put earlier must land before the notice, which may recycle the cell.
        connection->endpoint(0)->worker().fence(at());
        ucx::Notice notice;
        notice.target = sender_id;
        notice.from = id;
        notice.round = outstanding ? round : 0;
        notice.kind = ucx::NoticeKind::receiver_closed;
        rails->send_notice(*connection->endpoint(0), notice, outstanding, at());
        if (!outstanding || !sender_puts) {
            return true;
        }
        Backoff backoff;
        while (!arrived() && !acked.load(std::memory_order_acquire) && !sender_closed()) {
            connection->progress();
            if (backoff.pause()) {
                if (!connection->peer_alive()) {
                    return true;
                }
                if (backoff.elapsed_seconds() > ucx::teardown_grace_seconds()) {
                    return false;
                }
            }
        }
        return true;
    }
};

Ucx::RecvWindow::RecvWindow(const WindowSpec& spec) : state_(std::make_unique<State>()) {
    State& s = *state_;
    s.where = spec.where;
    s.rails = RailSet::instance(s.at());
    s.id = s.rails->next_window_id();
    s.buffer = spec.buffer;
    s.bytes = spec.bytes;
    if (s.bytes > 0) {
        s.allocation = s.rails->allocation(s.buffer, s.bytes);
        s.memfd = locate(s.buffer, s.bytes);
    }
    // A user buffer gets a staging area for the load/store path, as in the shm provider; it costs
    // address space only until a sender on this node copies into it.
    const bool staged = s.bytes > channel::inline_capacity && !s.allocation && s.memfd.fd < 0;
    const std::size_t inbox_bytes =
        (sizeof(ucx::Inbox) + channel::cache_line - 1) / channel::cache_line * channel::cache_line;
    s.inbox_memory = std::make_shared<ucx::MemoryHandle>(
        ucx::MemoryHandle::allocate(s.rails->rail(0).context, inbox_bytes + (staged ? s.bytes : 0),
                                    sizeof(ucx::Inbox), s.at()));
    s.inbox = new (s.inbox_memory->data()) ucx::Inbox();
    if (staged) {
        s.staging = s.inbox_memory->data() + inbox_bytes;
    }
    for (std::size_t rail = 0; rail < s.rails->size(); ++rail) {
        const auto& context = s.rails->rail(rail).context;
        if (rail == 0) {
            s.inbox_keys.push_back(s.inbox_memory->pack(s.at()));
        } else {
            auto registration = std::make_shared<ucx::MemoryHandle>(
                ucx::MemoryHandle::map(context, s.inbox, sizeof(ucx::Inbox), s.at()));
            s.inbox_keys.push_back(registration->pack(s.at()));
            s.inbox_registrations.push_back(std::move(registration));
        }
        if (s.bytes == 0) {
            s.buffer_keys.emplace_back();
        } else if (rail == 0 && s.allocation) {
            s.buffer_keys.push_back(s.allocation->pack(s.at()));
        } else {
            auto registration = std::make_shared<ucx::MemoryHandle>(
                ucx::MemoryHandle::map(context, s.buffer, s.bytes, s.at()));
            s.buffer_keys.push_back(registration->pack(s.at()));
            s.registrations.push_back(std::move(registration));
        }
    }
    s.rails->add_receiver(s.id, s.inbox, &s.acked, &s.sender_connected);
}

Ucx::RecvWindow::RecvWindow(RecvWindow&& other) noexcept = default;
Ucx::RecvWindow& Ucx::RecvWindow::operator=(RecvWindow&& other) noexcept = default;

Ucx::RecvWindow::~RecvWindow() {
    if (!state_) {
        return;
    }
    State& s = *state_;
    if (s.discarded) {
        s.rails->remove(s.id);
        return;
    }
    bool answered = true;
    if (s.connection != nullptr) {
        s.revoke_mapped();
        if (s.mapped_cell != nullptr) {
            s.mapped_cell->store(revoked_credit, std::memory_order_release);
        }
        try {
            if (!s.sender_closed()) {
                answered = s.revoke_put(s.round > 0 && !s.arrived());
            }
            s.finish_credit();
        } catch (const std::exception&) {
            answered = !s.credit_request.pending();
        }
    }
    if (s.connection != nullptr) {
        s.connection->progress(); // a sender_connected notice may be on its way
    }
    s.rails->remove(s.id);
    // A sender that has not unpacked the keys yet may still do so, and UCX crashes on keys of
    // freed shared memory: keep the memory until exit. A sender that may still write: likewise,
    // and keep this state too, from which UCX may still read the credit (a user buffer cannot be
    // kept).
    if (!answered || !s.sender_connected.load(std::memory_order_acquire)) {
        debug_log(std::string("ucx: keeping the UCX memory of a receive window until exit: its "
                              "sender ") +
                  (answered ? "has not connected" : "may still write into it") + " [" + s.at() +
                  "]");
        s.rails->bury(s.inbox_memory);
        for (auto& registration : s.inbox_registrations) {
            s.rails->bury(registration);
        }
        s.rails->bury(s.allocation);
        for (auto& registration : s.registrations) {
            s.rails->bury(registration);
        }
        if (!answered) {
            (void)state_.release(); // NOLINT(bugprone-unused-return-value)
        }
    }
}

void Ucx::RecvWindow::discard() noexcept {
    if (state_) {
        state_->discarded = true;
    }
}

Blob Ucx::RecvWindow::describe() const {
    const State& s = *state_;
    RecvDescription d{};
    d.id = s.id;
    d.inbox = reinterpret_cast<std::uintptr_t>(s.inbox);
    d.staging = reinterpret_cast<std::uintptr_t>(s.staging);
    d.buffer = reinterpret_cast<std::uintptr_t>(s.buffer);
    d.bytes = s.bytes;
    d.memfd = s.memfd.fd;
    d.memfd_offset = s.memfd.offset;
    d.pid = static_cast<std::int32_t>(getpid());
    BlobWriter description;
    description.put(d).put(static_cast<std::uint32_t>(s.inbox_keys.size()));
    for (std::size_t rail = 0; rail < s.inbox_keys.size(); ++rail) {
        ucx::put_key(description, s.inbox_keys[rail]);
        ucx::put_key(description, s.buffer_keys[rail]);
    }
    return description.take();
}

void Ucx::RecvWindow::connect(Connection& connection, const Blob& peer) {
    State& s = *state_;
    BlobReader reader(peer);
    const Blob cell_key = ucx::get_key(reader, "credit cell", s.at());
    const auto d = reader.get<SendDescription>();
    // UCX cannot unpack the keys of a dead process's shared memory (and crashes trying).
    if (!connection.peer_alive()) {
        raise<PeerLost>("the peer process exited before its send window was used", s.at());
    }
    s.connection = &connection;
    s.sender_id = d.id;
    s.cell_address = d.cell;
    s.cell_key = ucx::RemoteKey(connection.endpoint(0), cell_key, "credit cell", s.at());
    if (s.rails->settings().load_store) {
        s.mapped_cell = reinterpret_cast<std::atomic<std::uint64_t>*>(s.cell_key.pointer(d.cell));
    }
    // The sender chooses its path; where this side maps the sender's memory, the sender maps this
    // side's (same transports on both sides) and takes the load/store path.
    s.sender_puts = s.mapped_cell == nullptr;
}

void Ucx::RecvWindow::init() {
    State& s = *state_;
    ++s.round;
    // The credit goes where either path of the sender looks: the inbox (load/store) and the
    // sender's cell (put path).
    channel::grant(s.inbox->block, s.round);
    if (s.sender_closed()) {
        return; // nobody to grant; wait() reports PeerLost
    }
    if (s.mapped_cell != nullptr) {
        s.mapped_cell->store(s.round, std::memory_order_release);
        return;
    }
    s.finish_credit(); // UCX may still read the previous credit from `credit`
    s.credit = s.round;
    s.credit_request = ucx::put(s.cell_key, &s.credit, sizeof s.credit, s.cell_address, s.at());
}

bool Ucx::RecvWindow::test() {
    State& s = *state_;
    if (s.arrived()) {
        return true;
    }
    if (!s.sender_puts && !s.credit_request.pending()) {
        return false;
    }
    s.connection->progress();
    (void)s.credit_request.done("ucp_put_nbx (credit)", s.at()); // throws if the put failed
    return s.arrived();
}

std::size_t Ucx::RecvWindow::received_bytes() const noexcept {
    return state_->received;
}

bool Ucx::RecvWindow::peer_gone() const noexcept {
    return state_->sender_closed();
}

} // namespace pmr::detail
