// SPDX-License-Identifier: MIT
#include "providers/ucx/process.hpp"

#include "base/backoff.hpp"
#include "base/environment.hpp"
#include "base/error.hpp"
#include "base/shared_memory.hpp"
#include "rails/process_holder.hpp"
#include "rails/settings.hpp"

#include <pmr/settings.hpp>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <net/if.h>
#include <new>
#include <system_error>
#include <utility>

namespace pmr::detail::ucx {
namespace {

constexpr unsigned notice_id = 0x706d; // active-message id of the notices on pmr's own workers
constexpr unsigned piece_id = 0x706e;  // active-message id of the pieces of the message path
constexpr std::size_t cells_per_chunk = 256;

// Network interfaces are checked here; InfiniBand ports ("mlx5_0:1") are left to UCX.
std::string check_device(const std::string& device) {
    if (device.find(':') == std::string::npos && if_nametoindex(device.c_str()) == 0) {
        return "which is no network device of this host";
    }
    return {};
}

} // namespace

UcxSettings read_ucx_settings() {
    UcxSettings s;
    const rails::RailSettings rails = rails::read_rail_settings("ucx", max_rails, &check_device);
    s.devices = rails.devices;
    s.rails = rails.rails;
    s.load_store = *settings::flag("PMR_UCX_RKEY_PTR");
    const std::string peer_errors = *settings::choice("PMR_UCX_PEER_ERRORS");
    s.peer_errors = peer_errors == "on"    ? UcxSettings::PeerErrors::on
                    : peer_errors == "off" ? UcxSettings::PeerErrors::off
                                           : UcxSettings::PeerErrors::automatic;
    const std::string signal = *settings::choice("PMR_UCX_SIGNAL");
    s.signal = signal == "put"  ? UcxSettings::Signal::put
               : signal == "am" ? UcxSettings::Signal::am
                                : UcxSettings::Signal::automatic;
    const std::string path = *settings::choice("PMR_UCX_PATH");
    s.path = path == "put"       ? UcxSettings::Path::put
             : path == "message" ? UcxSettings::Path::message
                                 : UcxSettings::Path::automatic;
    s.lanes = *settings::choice("PMR_UCX_LANES") == "auto";
    s.lane_bytes = std::max<std::size_t>(*settings::size("PMR_UCX_LANE_BYTES"), 1); // 0: all
    s.rendezvous_bytes = settings::size("PMR_UCX_RNDV_BYTES");
    s.chunk_bytes = *settings::size("PMR_UCX_CHUNK_BYTES");
    if (s.chunk_bytes != 0 && s.chunk_bytes < UcxSettings::min_chunk_bytes) {
        raise<ArgumentError>(
            "environment variable PMR_UCX_CHUNK_BYTES=" + std::to_string(s.chunk_bytes) +
                " is below " + std::to_string(UcxSettings::min_chunk_bytes) +
                " B (each chunk is a message with a header of its own)",
            "ucx provider",
            "Give 0 (one message per piece) or at least " +
                std::to_string(UcxSettings::min_chunk_bytes) + ", e.g. 65280.");
    }
    return s;
}

const UcxSettings& ucx_settings() {
    static const UcxSettings s = read_ucx_settings();
    return s;
}

std::shared_ptr<UcxProcess> UcxProcess::instance(const std::string& where) {
    return rails::ProcessHolder<UcxProcess>::instance(
        where, [&] { return std::make_shared<UcxProcess>(ucx_settings(), where); });
}

std::shared_ptr<UcxProcess> UcxProcess::existing() noexcept {
    return rails::ProcessHolder<UcxProcess>::existing();
}

UcxProcess::UcxProcess(UcxSettings settings, const std::string& where)
    : settings_(std::move(settings)), cells_(registry_, cells_per_chunk) {
    for (std::size_t i = 0; i < settings_.rails; ++i) {
        Rail rail;
        rail.device = i < settings_.devices.size() ? settings_.devices[i] : std::string();
        const std::string at = where + ", UCX rail " + std::to_string(i) +
                               (rail.device.empty() ? "" : " (" + rail.device + ")");
        rail.context = std::make_shared<Context>(rail.device, at);
        rail.worker = std::make_shared<Worker>(rail.context, at);
        workers_thread_safe_ = workers_thread_safe_ && rail.worker->thread_safe();
        rails_.push_back(std::move(rail));
    }
    if (!workers_thread_safe_) {
        // Then no standby thread may progress them (watch()), and a rendezvous could wait for an
        // application that waits elsewhere.
        settings_.rendezvous_bytes = std::size_t{0};
        debug_log("ucx: workers are not thread-safe: no standby thread, and the message path "
                  "sends eagerly at every size");
    }
    endpoints_.resize(rails_.size());
    if (settings_.lanes) {
        lanes_ = std::make_unique<TcpLanes>(registry_);
    }
    ucp_am_handler_param_t handler{};
    handler.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                         UCP_AM_HANDLER_PARAM_FIELD_ARG;
    handler.id = notice_id;
    handler.cb = &UcxProcess::on_notice;
    handler.arg = this;
    for (const Rail& rail : rails_) {
        check(ucp_worker_set_am_recv_handler(rail.worker->get(), &handler),
              "ucp_worker_set_am_recv_handler", where);
        auto receiver = std::make_unique<PieceReceiver>();
        receiver->process = this;
        receiver->worker = rail.worker->get();
        ucp_am_handler_param_t pieces{};
        pieces.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                            UCP_AM_HANDLER_PARAM_FIELD_ARG;
        pieces.id = piece_id;
        pieces.cb = &UcxProcess::on_piece;
        pieces.arg = receiver.get();
        check(ucp_worker_set_am_recv_handler(rail.worker->get(), &pieces),
              "ucp_worker_set_am_recv_handler", where);
        piece_receivers_.push_back(std::move(receiver));
    }
    std::string text;
    for (const Rail& rail : rails_) {
        text += (text.empty() ? "" : ", ") + (rail.device.empty() ? "default" : rail.device);
    }
    debug_log("ucx: " + std::to_string(rails_.size()) + " rail(s): " + text);
}

UcxProcess::~UcxProcess() {
    stop_standby();
    if (lanes_ != nullptr) {
        // A window's last frames (its close) may still wait for room in a socket.
        lanes_->drain(std::min(teardown_grace_seconds(), 3.0));
    }
    // At exit the peers are usually closing too, and each close makes progress for the other. All
    // at once: a close may wait for the peer to progress its rail, and peers close in any order.
    constexpr double exit_grace_seconds = 3.0;
    bool clean = true;
    try {
        std::vector<Endpoint*> all;
        for (auto& rail : endpoints_) {
            for (auto& [address, endpoint] : rail) {
                all.push_back(endpoint.get());
            }
        }
        clean = Endpoint::close_all(all.data(), all.size(), exit_grace_seconds);
    } catch (const std::bad_alloc&) {
        for (auto& rail : endpoints_) {
            for (auto& [address, endpoint] : rail) {
                clean = endpoint->close(exit_grace_seconds) && clean;
            }
        }
    }
    endpoints_.clear();
    {
        // Closing the endpoints finished (or cancelled) what they still had to send.
        std::lock_guard<std::mutex> lock(notices_mutex_);
        reap_notices_locked();
        for (NoticeInFlight& notice : notices_) {
            // Still queued in a worker that is not closed cleanly: UCX may read the header until
            // the worker goes, so it stays.
            (void)notice.header.release(); // NOLINT(bugprone-unused-return-value): deliberate leak
            ucp_request_free(notice.request);
        }
        notices_.clear();
    }
    if (!clean) {
        // Destroying a worker with a half-closed endpoint trips UCX's assertions: the process is
        // exiting, so leave workers and contexts to the operating system.
        for (Rail& rail : rails_) {
            new std::shared_ptr<Worker>(std::move(rail.worker));   // NOLINT: deliberate leak
            new std::shared_ptr<Context>(std::move(rail.context)); // NOLINT: deliberate leak
        }
    }
}

std::shared_ptr<Endpoint> UcxProcess::endpoint(std::size_t rail, const Blob& address,
                                               bool peer_errors, const std::string& where) {
    std::lock_guard<std::mutex> lock(endpoints_mutex_);
    auto& endpoints = endpoints_[rail];
    auto it = endpoints.find(address);
    if (it != endpoints.end() && it->second->failure() == UCS_OK) {
        return it->second;
    }
    auto endpoint = std::make_shared<Endpoint>(rails_[rail].worker, address, peer_errors, where);
    endpoints[address] = endpoint;
    return endpoint;
}

// -------------------------------------------------------------------------------------------------
// Credit cells
// -------------------------------------------------------------------------------------------------

CreditCell UcxProcess::acquire_cell(const std::string& where) {
    // A new chunk is mapped outside the pool's lock: the notice handler takes locks inside UCX
    // progress.
    return cells_.acquire(
        [&](std::size_t bytes) {
            Chunk chunk{arena_block(bytes, where), Blob{}};
            chunk.key = chunk.memory->pack();
            return chunk;
        },
        where);
}

Blob UcxProcess::cell_key(const CreditCell& cell) const {
    return cells_.key(cell, [](const Chunk& chunk) { return chunk.key; });
}

// -------------------------------------------------------------------------------------------------
// Notices
// -------------------------------------------------------------------------------------------------

void UcxProcess::bury(std::shared_ptr<MemoryHandle> memory) noexcept {
    kept_.bury(std::move(memory));
}

ucs_status_t UcxProcess::post_notice(ucp_ep_h endpoint, const Notice& notice, bool reply) {
    // The node is allocated before the send, so that keeping an unfinished send cannot fail.
    std::list<NoticeInFlight> node;
    node.push_back({nullptr, std::make_unique<Notice>(notice)});
    ucp_request_param_t params{};
    params.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    params.flags = reply ? UCP_AM_SEND_FLAG_REPLY : 0;
    // Without the notices lock: over UCX's self transport the peer's handler runs inside this
    // call, and it may post a notice itself.
    ucs_status_ptr_t result = ucp_am_send_nbx(endpoint, notice_id, node.front().header.get(),
                                              sizeof(Notice), nullptr, 0, &params);
    if (!UCS_PTR_IS_PTR(result)) {
        return UCS_PTR_STATUS(result); // done (or failed) already: the header can go
    }
    node.front().request = result;
    std::lock_guard<std::mutex> lock(notices_mutex_);
    reap_notices_locked();
    notices_.splice(notices_.end(), node);
    return UCS_OK;
}

void UcxProcess::reap_notices_locked() noexcept {
    for (auto it = notices_.begin(); it != notices_.end();) {
        if (ucp_request_check_status(it->request) == UCS_INPROGRESS) {
            ++it;
            continue;
        }
        ucp_request_free(it->request);
        it = notices_.erase(it);
    }
}

void UcxProcess::send_notice(const Endpoint& endpoint, const Notice& notice, bool reply,
                             const std::string& where) {
    check(post_notice(endpoint.get(), notice, reply), "ucp_am_send_nbx", where);
}

Request UcxProcess::signal(const Endpoint& endpoint, const Notice& notice, const void* data,
                           std::size_t bytes, const std::string& where) {
    ucp_request_param_t params{};
    params.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    params.flags = UCP_AM_SEND_FLAG_EAGER; // the handler needs the data in its call
    return {
        ucp_am_send_nbx(endpoint.get(), notice_id, &notice, sizeof(Notice), data, bytes, &params),
        "ucp_am_send_nbx", where};
}

std::size_t UcxProcess::rendezvous_bytes() const {
    if (settings_.rendezvous_bytes) {
        return *settings_.rendezvous_bytes;
    }
    return SpinPolicy::instance().ranks_outnumber_cpus()
               ? UcxSettings::oversubscribed_rendezvous_bytes
               : 0;
}

Request UcxProcess::send_piece(const Endpoint& endpoint, const rails::Piece& piece,
                               const void* data, std::size_t bytes, std::size_t rendezvous_bytes,
                               const std::string& where) {
    ucp_request_param_t params{};
    params.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    // A round ahead of its credit always goes eagerly: the registry keeps its data aside until
    // the receiver begins the round, where a rendezvous would write into the buffer at once.
    if (rendezvous_bytes == 0 || bytes < rendezvous_bytes ||
        (piece.notice.flags & rails::early_flag) != 0 ||
        standby_failed_.load(std::memory_order_relaxed)) {
        // Eager: UCX completes the send once the data is on its way; the receiver copies it out
        // of UCX's buffer (reassembled first if UCX fragmented it: the rails split pieces into
        // UcxSettings::chunk_bytes so that it does not).
        params.flags = UCP_AM_SEND_FLAG_EAGER;
        return {
            ucp_am_send_nbx(endpoint.get(), piece_id, &piece, sizeof piece, data, bytes, &params),
            "ucp_am_send_nbx (message path)", where};
    }
    // Rendezvous (PMR_UCX_RNDV_BYTES): the receiver's UCX moves the data from `data` straight
    // into the receive buffer, after two more round trips. The send completes once the receiver has
    // the data, which takes the progress of both sides; while either application is away from pmr,
    // its standby thread provides it.
    params.flags = UCP_AM_SEND_FLAG_RNDV;
    return {ucp_am_send_nbx(endpoint.get(), piece_id, &piece, sizeof piece, data, bytes, &params),
            "ucp_am_send_nbx (message path, rendezvous)", where};
}

void UcxProcess::watch() {
    large_windows_.fetch_add(1, std::memory_order_relaxed);
    if (!workers_thread_safe_) {
        return;
    }
    std::lock_guard<std::mutex> lock(standby_mutex_);
    ++watched_;
    if (!standby_.joinable() && !standby_stopping_.load(std::memory_order_relaxed)) {
        try {
            standby_ = std::thread([this] { stand_by(); });
        } catch (const std::system_error& e) {
            // Without it a rendezvous could wait for an application that waits elsewhere.
            standby_failed_.store(true, std::memory_order_relaxed);
            debug_log(std::string("ucx: no standby thread, the message path sends eagerly: ") +
                      e.what());
        }
    }
    standby_cv_.notify_one();
}

void UcxProcess::unwatch() noexcept {
    large_windows_.fetch_sub(1, std::memory_order_relaxed);
    std::lock_guard<std::mutex> lock(standby_mutex_);
    if (watched_ > 0) {
        --watched_;
    }
}

namespace {

// Touches 256 KiB of this thread's stack below the caller's frame, a page at a time.
[[gnu::noinline]] void touch_stack() noexcept {
    constexpr std::size_t bytes = std::size_t{256} * 1024;
    constexpr std::size_t page = 4096;
    std::array<unsigned char, bytes> area; // NOLINT(cppcoreguidelines-pro-type-member-init)
    volatile unsigned char* const pages = area.data();
    for (std::size_t i = 0; i < bytes; i += page) {
        pages[i] = 1; // NOLINT(cppcoreguidelines-pro-bounds-pointer-arithmetic)
    }
}

// Allocates, touches and frees 96 KiB on this thread: its first allocation gives it a malloc arena
// of its own, whose pages then stay resident.
[[gnu::noinline]] void touch_heap() noexcept {
    constexpr std::size_t bytes = std::size_t{96} * 1024;
    constexpr std::size_t page = 4096;
    void* block = std::malloc(bytes); // NOLINT(cppcoreguidelines-no-malloc)
    if (block == nullptr) {
        return;
    }
    volatile unsigned char* const pages = static_cast<unsigned char*>(block);
    for (std::size_t i = 0; i < bytes; i += page) {
        pages[i] = 1; // NOLINT(cppcoreguidelines-pro-bounds-pointer-arithmetic)
    }
    std::free(block); // NOLINT(cppcoreguidelines-no-malloc)
}

} // namespace

void UcxProcess::stand_by() noexcept {
    // What the thread needs once (stack pages as deep as UCX's progress with pmr's handlers goes,
    // its malloc arena) is made resident now, while windows are set up, rather than at its first
    // progress, which may come at any time later: a process's resident memory would then grow in
    // its steady state (test_churn saw 68-72 KiB once in 3 of 6 runs).
    touch_stack();
    touch_heap();
    // Wakes once per interval while windows are watched and looks whether an application thread
    // progressed the workers since the last look; only if none did does it progress them, for
    // as long as that keeps finding work and the application stays away. Wake-ups are kept rare:
    // with as many busy ranks as cores each one can cost a waiting rank its core (a helper that
    // looked every 200 us made a 1 MiB round 10x slower), and on a loaded machine a rank that
    // waits in pmr may not run for several milliseconds, which the standby must not take for
    // absence (it would then contend with the rank for the worker's lock).
    constexpr auto interval = std::chrono::milliseconds(20);
    constexpr auto pause = std::chrono::microseconds(50);
    constexpr int idle_polls = 20; // fruitless polls (with pauses) before the next interval
    std::unique_lock<std::mutex> lock(standby_mutex_);
    std::uint64_t seen = progress_calls_.load(std::memory_order_relaxed);
    while (!standby_stopping_.load(std::memory_order_relaxed)) {
        if (watched_ == 0) {
            standby_cv_.wait(lock);
            seen = progress_calls_.load(std::memory_order_relaxed);
            continue;
        }
        standby_cv_.wait_for(lock, interval);
        const std::uint64_t calls = progress_calls_.load(std::memory_order_relaxed);
        if (calls != seen || standby_stopping_.load(std::memory_order_relaxed)) {
            seen = calls;
            continue;
        }
        lock.unlock();
        for (int idle = 0; idle < idle_polls &&
                           progress_calls_.load(std::memory_order_relaxed) == seen &&
                           !standby_stopping_.load(std::memory_order_relaxed);) {
            unsigned events = progress_lanes() ? 1 : 0;
            for (const Rail& rail : rails_) {
                events += rail.worker->progress();
            }
            if (events != 0) {
                idle = 0;
            } else {
                ++idle;
                std::this_thread::sleep_for(pause);
            }
        }
        lock.lock();
        seen = progress_calls_.load(std::memory_order_relaxed);
    }
}

void UcxProcess::stop_standby() noexcept {
    {
        std::lock_guard<std::mutex> lock(standby_mutex_);
        standby_stopping_.store(true, std::memory_order_relaxed);
    }
    standby_cv_.notify_all();
    if (standby_.joinable()) {
        standby_.join();
    }
}

ucs_status_t UcxProcess::on_piece(void* arg, const void* header, std::size_t header_length,
                                  void* data, std::size_t length,
                                  const ucp_am_recv_param_t* param) {
    if (header_length != sizeof(rails::Piece)) {
        return UCS_OK; // not ours; a rendezvous is dropped by returning without receiving it
    }
    const auto* receiver = static_cast<const PieceReceiver*>(arg);
    rails::Registry& registry = receiver->process->registry_;
    rails::Piece piece;
    std::memcpy(&piece, header, sizeof piece);
    if ((param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) == 0) {
        registry.landed(piece, data, length);
        return UCS_OK;
    }
    // Rendezvous: UCX moves the data straight into the receive buffer.
    auto* landing = new (std::nothrow) Landing{receiver->process, piece};
    std::byte* into = landing != nullptr ? registry.destination(piece, length) : nullptr;
    if (into == nullptr) {
        delete landing;
        return UCS_OK; // the window is gone (or no memory): dropped, the sender completes
    }
    ucp_request_param_t params{};
    params.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    params.cb.recv_am = &UcxProcess::on_piece_landed;
    params.user_data = landing;
    const ucs_status_ptr_t result =
        ucp_am_recv_data_nbx(receiver->worker, data, into, length, &params);
    if (UCS_PTR_IS_ERR(result)) {
        // The round never completes here; the receiver's wait ends in PeerLost or Timeout.
        debug_log(std::string("ucx: receiving a piece failed: ") +
                  ucs_status_string(UCS_PTR_STATUS(result)));
        registry.received(piece, length, false);
        delete landing;
    } else if (result == nullptr) {
        registry.received(piece, length, true);
        delete landing;
    }
    return UCS_OK;
}

void UcxProcess::on_piece_landed(void* request, ucs_status_t status, std::size_t length,
                                 void* user_data) {
    auto* landing = static_cast<Landing*>(user_data);
    landing->process->registry_.received(landing->piece, length, status == UCS_OK);
    delete landing;
    ucp_request_free(request);
}

ucs_status_t UcxProcess::on_notice(void* arg, const void* header, std::size_t header_length,
                                   void* data, std::size_t length,
                                   const ucp_am_recv_param_t* param) {
    if (header_length != sizeof(Notice) || (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0) {
        return UCS_OK; // not ours (pmr sends only small eager messages)
    }
    Notice notice;
    std::memcpy(&notice, header, sizeof notice);
    const bool can_reply = (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) != 0;
    static_cast<UcxProcess*>(arg)->handle(notice, data, length,
                                          can_reply ? param->reply_ep : nullptr);
    return UCS_OK;
}

void UcxProcess::handle(const Notice& notice, const void* data, std::size_t bytes,
                        ucp_ep_h reply_endpoint) {
    const std::optional<Notice> answer = registry_.handle(notice, data, bytes);
    // Outside the registry's lock: over UCX's self transport the answer runs this handler again.
    if (answer && reply_endpoint != nullptr) {
        // The acknowledgement must not overtake the puts of earlier rounds.
        ucp_worker_fence(rails_[0].worker->get());
        // A failure needs no handling: the receiver's wait for the acknowledgement is bounded.
        // Nothing may escape into UCX, which called this handler.
        try {
            (void)post_notice(reply_endpoint, *answer, false);
        } catch (const std::bad_alloc&) {
            // No acknowledgement: the receiver's bounded wait covers it, as for a lost one.
        }
    }
}

// -------------------------------------------------------------------------------------------------
// Library-owned memory
// -------------------------------------------------------------------------------------------------

std::shared_ptr<MemoryHandle> UcxProcess::arena_block(std::size_t bytes, const std::string& where) {
    if (!settings_.load_store) {
        return std::make_shared<MemoryHandle>(
            MemoryHandle::allocate(rails_[0].context, bytes, where));
    }
    std::byte* data = allocate_shared(bytes, where);
    try {
        const MemoryLocation location = locate(data, bytes);
        KeyLocation at;
        at.segment = location.segment;
        at.file_bytes = location.file_bytes;
        at.fd = location.fd;
        std::byte* const file = data - location.offset;
        at.base = reinterpret_cast<std::uintptr_t>(file);
        if (location.fd < 0 || location.segment == 0) { // a file of its own (or none)
            return std::make_shared<MemoryHandle>(
                MemoryHandle::map(rails_[0].context, data, bytes, where, at, &free_shared));
        }
        std::shared_ptr<const MemoryHandle> segment;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            const auto found = segments_.find(location.segment);
            if (found != segments_.end()) {
                segment = found->second;
            }
        }
        if (segment == nullptr) {
            // Registered outside the lock (the notice handler takes it inside UCX progress); a
            // second thread registering the same segment meanwhile loses its registration.
            auto whole = std::make_shared<const MemoryHandle>(
                MemoryHandle::map(rails_[0].context, file, location.file_bytes, where, at));
            std::lock_guard<std::mutex> lock(mutex_);
            segment = segments_.emplace(location.segment, std::move(whole)).first->second;
        }
        return std::make_shared<MemoryHandle>(
            MemoryHandle::block(std::move(segment), data, bytes, &free_shared, where));
    } catch (...) {
        free_shared(data);
        throw;
    }
}

void* UcxProcess::allocate(std::size_t bytes, const std::string& where) {
    auto memory = arena_block(bytes, where); // zero-filled, as pmr promises window memory
    void* data = memory->data();
    kept_.add(std::move(memory));
    return data;
}

void UcxProcess::deallocate(void* pointer) noexcept {
    kept_.release(pointer);
}

std::shared_ptr<MemoryHandle> UcxProcess::allocation(const void* pointer, std::size_t bytes) const {
    return kept_.find(pointer, bytes);
}

} // namespace pmr::detail::ucx
