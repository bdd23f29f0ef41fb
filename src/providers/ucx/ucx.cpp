// SPDX-License-Identifier: MIT
#include "providers/ucx/ucx.hpp"

#include "providers/ucx/transport.hpp"
#include "rails/window_members.hpp"

#include "base/backoff.hpp"
#include "base/copy_sender.hpp"
#include "base/environment.hpp"
#include "base/error.hpp"

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <new>
#include <unistd.h>
#include <utility>

namespace pmr::detail {

using ucx::UcxProcess;

namespace {

constexpr std::uint32_t hello_version = 2;

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

Ucx::Local::Local(const ConnectionSetup& setup) : process(UcxProcess::instance(setup.where)) {}

Blob Ucx::Local::hello() const {
    BlobWriter hello;
    hello.put(hello_version).put(ucx_version()).put(static_cast<std::uint32_t>(process->size()));
    for (std::size_t i = 0; i < process->size(); ++i) {
        hello.put_bytes(process->rail(i).worker->address());
    }
    if (const ucx::TcpLanes* lanes = process->lanes()) {
        lanes->describe(hello, process->settings().lane_bytes);
    } else {
        hello.put<std::uint8_t>(0).put(std::uint64_t{0}).put(std::uint64_t{0});
        hello.put(std::uint16_t{0}).put(std::uint32_t{0});
    }
    return hello.take();
}

void* Ucx::allocate(std::size_t bytes, const std::string& where) {
    return UcxProcess::instance(where)->allocate(bytes, where);
}

void Ucx::deallocate(void* pointer) noexcept {
    if (auto process = UcxProcess::existing()) {
        process->deallocate(pointer);
    }
}

// -------------------------------------------------------------------------------------------------
// Connection
// -------------------------------------------------------------------------------------------------

Ucx::Connection::Connection(Local&& local, const ConnectionSetup& setup, const PeerInfo& peer,
                            const Blob& hello)
    : process_(std::move(local.process)), same_node_(peer.same_node), pid_(peer.pid) {
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
    const ucx::LanePeer lane_peer = ucx::TcpLanes::read(reader);
    reader.finish();
    const std::size_t count = std::min<std::size_t>(peer_rails, process_->size());
    if (count == 0) {
        raise<ProviderError>("the peer offers no UCX rail", setup.where,
                             "Check PMR_UCX_RAILS / PMR_UCX_DEVICES on the peer.");
    }
    const bool peer_errors = wants_peer_errors(same_node_);
    for (std::size_t i = 0; i < count; ++i) {
        endpoints_.push_back(process_->endpoint(i, addresses[i], peer_errors,
                                                setup.where + ", UCX rail " + std::to_string(i)));
    }
    if (same_node_) {
        peer_process_ = PeerProcess(pid_);
    }
    emulated_ = std::any_of(endpoints_.begin(), endpoints_.end(),
                            [](const auto& endpoint) { return endpoint->rma_emulated(); });
    switch (process_->settings().path) {
    case ucx::UcxSettings::Path::put:
        messages_ = false;
        break;
    case ucx::UcxSettings::Path::message:
        messages_ = true;
        break;
    case ucx::UcxSettings::Path::automatic:
        messages_ = emulated_;
        break;
    }
    rendezvous_bytes_ = process_->rendezvous_bytes();
    peer_token_ = lane_peer.token;
    if (messages_ && lane_peer.listening && process_->lanes() != nullptr &&
        process_->lanes()->listening()) {
        peer_lane_bytes_ = std::max<std::size_t>(lane_peer.lane_bytes, 1);
    }
    if (messages_ && process_->lanes() != nullptr) {
        // One lane per rail, over the device UCX's TCP transport uses for it; all or none.
        for (std::size_t i = 0; i < count; ++i) {
            const std::string device = ucx::tcp_lane_device(endpoints_[i]->info());
            auto lane = process_->lanes()->open(i, lane_peer, device,
                                                setup.where + ", UCX rail " + std::to_string(i));
            if (lane == nullptr) {
                lanes_.clear();
                break;
            }
            lanes_.push_back(std::move(lane));
        }
    }
    debug_log("ucx: " + std::to_string(count) + " rail(s) (this side " +
              std::to_string(process_->size()) + ", peer " + std::to_string(peer_rails) +
              "), peer error handling " + (peer_errors ? "by UCX" : "by pidfd and PMR_TIMEOUT") +
              ", RMA " +
              (messages_ ? "emulated or PMR_UCX_PATH=message: message path"
                         : "native or PMR_UCX_PATH=put: put path") +
              " where memory is not mapped [" + setup.where + "]");
    if (settings().debug) {
        ucp_ep_print_info(endpoints_.front()->get(), stderr);
    }
}

bool Ucx::Connection::peer_alive() {
    progress();
    if (lost_->load(std::memory_order_relaxed)) {
        return false;
    }
    bool alive = std::none_of(endpoints_.begin(), endpoints_.end(),
                              [](const auto& endpoint) { return endpoint->failure() != UCS_OK; });
    if (alive && !lanes_.empty() && process_->lanes()->lost(peer_token_)) {
        alive = false;
    }
    alive = alive && peer_process_.alive();
    if (!alive) {
        lost_->store(true, std::memory_order_relaxed);
    }
    return alive;
}

RailInfo Ucx::Connection::rail(std::size_t index) const {
    const std::string& device = process_->rail(index).device;
    return {device.empty() ? std::string("ucx rail ") + std::to_string(index) : device, 0.0};
}

void Ucx::Connection::progress() const noexcept {
    process_->note_progress();
    (void)process_->progress_lanes();
    if (lost_->load(std::memory_order_relaxed)) {
        return;
    }
    for (const auto& lane : lanes_) {
        if (lane->failed()) {
            lost_->store(true, std::memory_order_relaxed);
            return;
        }
    }
    for (std::size_t i = 0; i < endpoints_.size(); ++i) {
        process_->rail(i).worker->progress();
    }
}

// -------------------------------------------------------------------------------------------------
// Send window
// -------------------------------------------------------------------------------------------------

namespace {

using Transport = ucx::BasicTransport<Ucx::Connection>;
static_assert(rails::has_credit_carrier<Transport>::value,
              "credits ride on data going back to the peer (rails/protocol.hpp)");

/// What the ucx provider adds to the rails description of a receive window: where a sender on this
/// node maps its buffer (pmr::allocate memory), for the load/store path.
struct LocalDescription {
    std::uint64_t memfd_offset; ///< where the buffer lies in its pmr::allocate memory file
    std::uint64_t segment;      ///< its arena segment (mapped once per peer), 0: a file of its own
    std::uint64_t file_bytes;   ///< size of the memory file
    std::int32_t memfd;         ///< -1: not pmr::allocate memory
    std::int32_t pid;
};

} // namespace

/// The put path (`rails`, which also tears down both paths), or the load/store path where the
/// receiver's inbox is mapped here (connect()).
template <>
struct rails::Window<Ucx, rails::send>::State : rails::SendState<Transport, false> {
    using SendState::SendState;

    bool close();
    void connect(Connection& connection, const Blob& peer, std::size_t peer_bytes);
    void post(const std::byte* data, std::size_t bytes);
    void post(const std::byte* data, const RailRange* ranges, std::size_t count);
    void post(const std::byte* data, const RailSlice* slices, std::size_t count,
              std::size_t element_size);
    bool test();
    bool peer_gone() const noexcept;

    /// Counted in UcxProcess::watch() (may send by rendezvous); alive while `rails` is.
    UcxProcess* watched = nullptr;

    // Load/store path: the copy channel of the shm provider on the mapped inbox.
    ucx::Inbox* mapped_inbox = nullptr;
    SharedMapping buffer_mapping; ///< the receive buffer, in a pmr::allocate file of its own
    std::shared_ptr<PeerMemory> peer_segments; ///< the receive buffer's arena segment mapped
    CopySender copier;

    bool load_store() const noexcept { return mapped_inbox != nullptr; }
};

bool rails::Window<Ucx, rails::send>::State::close() {
    if (load_store()) {
        copier.close();
    }
    UcxProcess* const was_watched = std::exchange(watched, nullptr);
    // False: UCX still reads from this state, which is kept, better leaked than overwritten.
    const bool closed = rails.close();
    if (was_watched != nullptr) {
        was_watched->unwatch();
    }
    return closed;
}

void rails::Window<Ucx, rails::send>::State::connect(Connection& connection, const Blob& peer,
                                                     std::size_t peer_bytes) {
    State& s = *this;
    bool by_message = false;
    switch (connection.process().settings().signal) {
    case ucx::UcxSettings::Signal::put:
        by_message = false;
        break;
    case ucx::UcxSettings::Signal::am:
        by_message = true;
        break;
    case ucx::UcxSettings::Signal::automatic:
        by_message = connection.same_node();
        break;
    }
    BlobReader reader(peer, s.at());
    const rails::RecvDescription d = s.rails.connect(connection, reader, by_message, peer_bytes);
    const Blob local_blob = reader.get_bytes();
    BlobReader local_reader(local_blob, s.at());
    reader.finish();
    const auto local = local_reader.get<LocalDescription>();
    local_reader.finish();
    if (connection.same_node() && local.pid != connection.peer_pid()) {
        local_reader.malformed("the receive window names process " + std::to_string(local.pid) +
                               ", but the peer is process " +
                               std::to_string(connection.peer_pid()));
    }
    if (connection.process().settings().load_store) {
        s.mapped_inbox = reinterpret_cast<ucx::Inbox*>(s.rails.inbox_key(0).pointer(d.inbox));
    }
    if (!s.load_store() && connection.needs_peer_progress() && peer_bytes >= ucx::standby_bytes) {
        connection.process().watch();
        s.watched = &connection.process();
    }
    if (!s.load_store() && connection.messages()) {
        const ucx::UcxSettings& ucx_config = connection.process().settings();
        if (connection.takes_lanes(peer_bytes)) {
            // Every message of this window through the connection's TCP lanes (lanes.hpp): large
            // rounds whole, read straight into the receive buffer.
            s.rails.use_messages(0, 0, true);
            debug_log("ucx: message path over pmr's TCP lanes: every round one frame per rail, "
                      "read straight into the receive buffer; credits as UCX messages [" +
                      s.at() + "]");
            return;
        }
        // Without the standby thread (watched above) send_piece() sends every piece eagerly.
        const std::size_t rendezvous =
            connection.process().standby_failed() ? 0 : connection.rendezvous_bytes();
        s.rails.use_messages(rendezvous, ucx_config.chunk_bytes);
        debug_log(std::string("ucx: message path: one active message per round (up to ") +
                  std::to_string(copy_channel::inline_capacity) +
                  " B inside a notice; larger eagerly, copied into the receive buffer" +
                  (ucx_config.chunk_bytes != 0
                       ? ", in messages of up to " + std::to_string(ucx_config.chunk_bytes) + " B"
                       : std::string()) +
                  (rendezvous != 0 ? "; from " + std::to_string(rendezvous) +
                                         " B by rendezvous straight into the receive buffer"
                                   : std::string()) +
                  "), credits as messages [" + s.at() + "]");
        return;
    }
    if (!s.load_store()) {
        debug_log(std::string("ucx: puts (up to ") + std::to_string(copy_channel::inline_capacity) +
                  " B inline in the slot), fence and sequence put; larger messages: puts, then " +
                  (by_message ? "an active message on the same lane" : "fence and sequence put") +
                  " [" + s.at() + "]");
        return;
    }
    s.rails.use_load_store();
    // Load/store: the receiver's inbox, and its buffer where UCX (ucp_rkey_ptr) or pmr::allocate
    // (a memory file) lets this process map it; a user buffer through cross-memory attach or the
    // staging area behind the inbox, as the shm provider does.
    CopyTarget target;
    target.control = &s.mapped_inbox->block;
    if (d.bytes > 0 && s.rails.buffer_key(0) != nullptr) {
        target.mapped = s.rails.buffer_key(0)->pointer(d.buffer);
    }
    if (target.mapped == nullptr && local.memfd >= 0 && d.bytes > 0) {
        try {
            if (local.segment != 0) { // one mapping per segment and peer process
                MemoryLocation location;
                location.fd = local.memfd;
                location.offset = local.memfd_offset;
                location.segment = local.segment;
                location.file_bytes = local.file_bytes;
                s.peer_segments = peer_memory(connection.peer_pid());
                target.mapped = s.peer_segments->address(location, d.bytes, s.at().c_str());
            } else {
                s.buffer_mapping = SharedMapping::open(connection.peer_pid(), local.memfd,
                                                       local.memfd_offset, d.bytes, s.at().c_str());
                target.mapped = s.buffer_mapping.data();
            }
        } catch (const Error& e) {
            debug_log(std::string("ucx: pmr memory of the peer not mapped: ") + e.what());
        }
    }
    if (d.extra != 0) {
        target.staging = s.rails.inbox_key(0).pointer(d.extra);
    }
    target.remote_address = d.buffer;
    target.pid = connection.peer_pid();
    target.cma = settings().shm_cma;
    target.cma_threshold = settings().shm_cma_threshold;
    s.copier.attach(target, s.where);
    debug_log(std::string("ucx: load/store through the receiver's mapped memory: ") +
              (target.mapped != nullptr ? "memcpy into the mapped receive buffer"
               : target.cma             ? "cross-memory attach above PMR_SHM_CMA_THRESHOLD, "
                                          "staging below"
                                        : "staging copies") +
              ", inline up to " + std::to_string(copy_channel::inline_capacity) + " B [" + s.at() +
              "]");
}

void rails::Window<Ucx, rails::send>::State::post(const std::byte* data, std::size_t bytes) {
    State& s = *this;
    if (s.load_store()) {
        s.copier.post(data, bytes);
    } else {
        s.rails.post(data, bytes);
    }
}

void rails::Window<Ucx, rails::send>::State::post(const std::byte* data, const RailRange* ranges,
                                                  std::size_t count) {
    State& s = *this;
    if (s.load_store()) {
        // One copy; rails mean network devices.
        s.copier.post(data, count > 0 ? ranges[count - 1].offset + ranges[count - 1].bytes : 0);
    } else {
        s.rails.post(data, ranges, count);
    }
}

void rails::Window<Ucx, rails::send>::State::post(const std::byte* data, const RailSlice* slices,
                                                  std::size_t count, std::size_t element_size) {
    State& s = *this;
    if (s.load_store()) {
        s.copier.post(data, count > 0
                                ? (slices[count - 1].first + slices[count - 1].count) * element_size
                                : 0);
    } else {
        s.rails.post(data, slices, count, element_size);
    }
}

bool rails::Window<Ucx, rails::send>::State::test() {
    State& s = *this;
    return s.load_store() ? s.copier.progress() : s.rails.progress();
}

bool rails::Window<Ucx, rails::send>::State::peer_gone() const noexcept {
    const State& s = *this;
    return s.rails.receiver_closed() ||
           (s.mapped_inbox != nullptr &&
            s.mapped_inbox->block.credit.load(std::memory_order_acquire) ==
                copy_channel::revoked_credit);
}

// -------------------------------------------------------------------------------------------------
// Receive window
// -------------------------------------------------------------------------------------------------

namespace {

// A user buffer gets a staging area for the load/store path, as in the shm provider; it costs
// address space only until a sender on this node copies into it.
std::size_t staging_bytes(const WindowSpec& spec, UcxProcess& process) {
    const bool pmr_memory = spec.bytes > 0 && (process.allocation(spec.buffer, spec.bytes) ||
                                               locate(spec.buffer, spec.bytes).fd >= 0);
    return spec.bytes > copy_channel::inline_capacity && !pmr_memory ? spec.bytes : 0;
}

} // namespace

template <>
struct rails::Window<Ucx, rails::receive>::State : rails::RecvState<Transport> {
    explicit State(const WindowSpec& spec) : State(spec, UcxProcess::instance(*spec.where)) {}
    State(const WindowSpec& spec, const std::shared_ptr<UcxProcess>& process)
        : RecvState(spec, process, staging_bytes(spec, *process)),
          memfd(spec.bytes > 0 ? locate(spec.buffer, spec.bytes) : MemoryLocation{}),
          memfd_buffer(spec.buffer), bytes(spec.bytes) {}

    bool close();
    Blob describe() const;
    void connect(Connection& connection, const Blob& peer, std::size_t peer_bytes);

    MemoryLocation memfd; ///< pmr::allocate memory, which a sender on this node maps
    const void* memfd_buffer = nullptr;
    std::size_t bytes = 0;
    /// Counted in UcxProcess::watch() (may receive by rendezvous); alive while `rails` is.
    UcxProcess* watched = nullptr;
    pid_t peer_pid = 0; ///< the sender's process, where it runs on this node
};

bool rails::Window<Ucx, rails::receive>::State::close() {
    UcxProcess* const was_watched = std::exchange(watched, nullptr);
    ucx::Inbox* const inbox = rails.inbox();
    if (rails.sender_maps() && peer_pid > 0 &&
        inbox->block.sender_closed.load(std::memory_order_acquire) == 0) {
        // A sender that maps this side's arena blocks writes into them until its close (the
        // control block's last word): they are not handed out again before that, as in the shm
        // provider.
        try {
            hold_shared(inbox, &inbox->block.sender_closed, peer_pid);
            if (bytes > 0 && memfd.fd >= 0) {
                hold_shared(memfd_buffer, &inbox->block.sender_closed, peer_pid);
            }
        } catch (...) {
            // No memory for the record: keeping the window's memory beats its reuse under a
            // writer.
            if (was_watched != nullptr) {
                was_watched->unwatch();
            }
            return false;
        }
    }
    // False: the sender may still write into this state (UCX reads the credit from it).
    const bool closed = rails.close();
    if (was_watched != nullptr) {
        was_watched->unwatch();
    }
    return closed;
}

Blob rails::Window<Ucx, rails::receive>::State::describe() const {
    const State& s = *this;
    LocalDescription local{};
    local.memfd = s.memfd.fd;
    local.memfd_offset = s.memfd.offset;
    local.segment = s.memfd.segment;
    local.file_bytes = s.memfd.file_bytes;
    local.pid = static_cast<std::int32_t>(getpid());
    return s.rails.describe(BlobWriter().put(local).take());
}

void rails::Window<Ucx, rails::receive>::State::connect(Connection& connection, const Blob& peer,
                                                        std::size_t peer_bytes) {
    State& s = *this;
    s.rails.connect(connection, peer, connection.process().settings().load_store);
    s.peer_pid = connection.same_node() ? connection.peer_pid() : 0;
    if (connection.messages()) {
        s.rails.use_credit_notices(); // unless the sender's cell is mapped here
    }
    // (A sender that maps this side's memory takes the load/store path instead; watching costs
    // it nothing but a look every 20 ms.)
    // (Lanes are read wherever such a window exists.)
    if ((connection.needs_peer_progress() && peer_bytes >= ucx::standby_bytes) ||
        connection.peer_streams(s.bytes)) {
        connection.process().watch();
        s.watched = &connection.process();
    }
}

PMR_RAILS_WINDOWS(Ucx);

} // namespace pmr::detail
