// SPDX-License-Identifier: MIT
#include "providers/shm/shm.hpp"

#include "base/backoff.hpp"

#include <atomic>
#include <cerrno>
#include <limits>
#include <new>
#include <unistd.h>
#include <utility>

namespace pmr::detail {
namespace {

constexpr std::size_t control_bytes = 4096;
// The offer of shared copies (copy_channel.hpp) behind the control block, in the same page, and
// the attach word on the last cache line.
constexpr std::size_t offer_offset = 2048;
constexpr std::size_t attach_offset = control_bytes - 64;
static_assert(sizeof(copy_channel::ControlBlock) <= offer_offset);
static_assert(offer_offset + sizeof(copy_channel::Offer) <= attach_offset);

// The window's generation while no sender is attached, with attached_bit once one is; 0 once the
// receive window is gone.
struct Attach {
    std::atomic<std::uint64_t> word{0};
    std::atomic<std::int32_t> sender_pid{0};
};
static_assert(sizeof(Attach) <= 64);
constexpr std::uint64_t attached_bit = std::uint64_t{1} << 63;

copy_channel::Offer* offer_in(std::byte* control) noexcept {
    return reinterpret_cast<copy_channel::Offer*>(control + offer_offset);
}

Attach* attach_in(std::byte* control) noexcept {
    return reinterpret_cast<Attach*>(control + attach_offset);
}

std::uint64_t next_generation() noexcept {
    static std::atomic<std::uint64_t> generation{0};
    return generation.fetch_add(1, std::memory_order_relaxed) + 1;
}

Shm::Place place_of(const MemoryLocation& location) noexcept {
    return {location.fd, location.segment, location.offset, location.file_bytes};
}

} // namespace

Shm::Description Shm::parse_description(const Blob& message, pid_t peer_pid, std::size_t peer_bytes,
                                        const std::string& where) {
    BlobReader reader(message, where);
    const auto d = reader.get<Description>();
    reader.finish();
    if (d.pid != peer_pid) {
        reader.malformed("the receive window names process " + std::to_string(d.pid) +
                         ", but the peer is process " + std::to_string(peer_pid));
    }
    if (d.bytes != peer_bytes) {
        reader.malformed("the receive window describes " + std::to_string(d.bytes) +
                         " B, but announced " + std::to_string(peer_bytes) + " B");
    }
    if (d.control.fd < 0 || d.buffer.fd < -1 || (d.has_staging != 0 && d.has_staging != 1) ||
        d.generation == 0 || (d.generation & attached_bit) != 0) {
        reader.malformed("bad descriptors (" + std::to_string(d.control.fd) + ", " +
                         std::to_string(d.buffer.fd) + ")");
    }
    // The receiver stages exactly when its buffer is not pmr memory and not empty.
    if ((d.has_staging == 1) != (d.buffer.fd < 0 && d.bytes > 0)) {
        reader.malformed("a staging area that does not fit the buffer");
    }
    if (d.buffer.fd >= 0 && d.buffer.offset > std::numeric_limits<std::uint64_t>::max() - d.bytes) {
        reader.malformed("a buffer beyond the end of its memory file");
    }
    if (d.bytes > 0 && d.address == 0) {
        reader.malformed("a null buffer address");
    }
    return d;
}

Shm::Connection::Connection(Local&& /*local*/, const ConnectionSetup& setup, const PeerInfo& peer,
                            const Blob& /*hello*/)
    : process_(peer.pid) {
    if (!peer.same_node) {
        raise<ProviderError>("shared memory cannot reach a peer on another node (" + peer.node +
                                 ")",
                             setup.where, "Unset PMR_PROVIDER=shm or use a network provider.");
    }
    memory_ = detail::peer_memory(peer.pid);
}

Shm::SendWindow::SendWindow(const WindowSpec& spec) noexcept : where_(spec.where) {}

std::byte* Shm::SendWindow::map(Connection& connection, const Place& place, std::size_t bytes,
                                SharedMapping& own) {
    MemoryLocation location;
    location.fd = static_cast<int>(place.fd);
    location.segment = place.segment;
    location.offset = static_cast<std::size_t>(place.offset);
    location.file_bytes = static_cast<std::size_t>(place.file_bytes);
    if (place.segment != 0) {
        return peer_memory_->address(location, bytes, where_->c_str());
    }
    own = SharedMapping::open(connection.peer_pid(), location.fd, location.offset, bytes,
                              where_->c_str());
    return own.data();
}

void Shm::SendWindow::connect(Connection& connection, const Blob& peer, std::size_t peer_bytes) {
    const pid_t pid = connection.peer_pid();
    const Description d = parse_description(peer, pid, peer_bytes, *where_);
    const std::size_t staging = d.has_staging != 0 ? d.bytes : 0;
    peer_memory_ = connection.peer_memory();
    std::byte* control = map(connection, d.control, control_bytes + staging, control_);
    CopyTarget target;
    target.control = reinterpret_cast<copy_channel::ControlBlock*>(control);
    target.staging = d.has_staging != 0 ? control + control_bytes : nullptr;
    if (d.buffer.fd >= 0 && d.bytes > 0) {
        target.mapped = map(connection, d.buffer, d.bytes, buffer_);
    }
    // Last: once attached, the receiver keeps these blocks for us until we close.
    Attach& attach = *attach_in(control);
    attach.sender_pid.store(static_cast<std::int32_t>(getpid()), std::memory_order_relaxed);
    std::uint64_t expected = d.generation;
    if (!attach.word.compare_exchange_strong(expected, d.generation | attached_bit,
                                             std::memory_order_acq_rel)) {
        raise<PeerLost>("the peer's receive window is gone", *where_,
                        "The peer destroyed its window before the first use.");
    }
    target.remote_address = d.address;
    target.pid = pid;
    target.cma = settings().shm_cma;
    target.cma_threshold = settings().shm_cma_threshold;
    if (target.mapped == nullptr && settings().shm_chunk > 0) {
        target.offer = offer_in(control);
        target.min_chunk = settings().shm_chunk;
    }
    sender_.attach(target, where_);
    debug_log(std::string(target.mapped != nullptr ? "direct copies into pmr memory"
                          : target.cma             ? "cross-memory attach above threshold"
                                                   : "staging copies") +
              " [" + *where_ + "]");
}

Shm::RecvWindow::RecvWindow(const WindowSpec& spec)
    : generation_(next_generation()), location_(locate(spec.buffer, spec.bytes)),
      buffer_(spec.buffer), address_(reinterpret_cast<std::uintptr_t>(spec.buffer)),
      bytes_(spec.bytes) {
    const bool staging = location_.fd < 0 && spec.bytes > 0;
    control_.reset(allocate_shared(control_bytes + (staging ? spec.bytes : 0), *spec.where));
    control_location_ = locate(control_.get(), control_bytes);
    auto* control = new (control_.get()) copy_channel::ControlBlock();
    new (control_.get() + offer_offset) copy_channel::Offer();
    new (control_.get() + attach_offset) Attach();
    attach_in(control_.get())->word.store(generation_, std::memory_order_release);
    receiver_.attach(control, spec.buffer, staging ? control_.get() + control_bytes : nullptr);
}

Shm::RecvWindow::~RecvWindow() {
    copy_channel::ControlBlock* control = receiver_.control();
    if (control == nullptr || !control_) {
        return; // moved from
    }
    // A sender may be copying into our user buffer right now (cross-memory attach): wait until it
    // is done before the buffer can be freed. Bounded, and abandoned if the peer has died.
    Backoff backoff;
    while (copy_channel::revoke(*control) != 0) {
        if (backoff.pause() && (backoff.elapsed_seconds() > 10.0 ||
                                (connection_ != nullptr && !connection_->peer_alive()))) {
            break;
        }
    }
    // A sender that never attached cannot any more; one that did may write into the control
    // block and a pmr buffer until it closes: their blocks wait for that before reuse.
    Attach& attach = *attach_in(control_.get());
    std::uint64_t expected = generation_;
    if (attach.word.compare_exchange_strong(expected, 0, std::memory_order_acq_rel) ||
        control->sender_closed.load(std::memory_order_acquire) != 0) {
        return;
    }
    const pid_t sender = attach.sender_pid.load(std::memory_order_relaxed);
    try {
        hold_shared(control_.get(), &control->sender_closed, sender);
        if (location_.fd >= 0 && bytes_ > 0) {
            hold_shared(buffer_, &control->sender_closed, sender);
        }
    } catch (...) {
        // Out of memory for the record: keeping the block beats its reuse under a writer.
        static_cast<void>(control_.release());
    }
}

Blob Shm::RecvWindow::describe() const {
    Description d{};
    d.pid = static_cast<std::int32_t>(getpid());
    d.control = place_of(control_location_);
    d.buffer = place_of(location_);
    d.generation = generation_;
    d.has_staging = location_.fd < 0 && bytes_ > 0 ? 1 : 0;
    d.address = address_;
    d.bytes = bytes_;
    return BlobWriter().put(d).take();
}

void Shm::RecvWindow::connect(Connection& connection, const Blob& /*peer*/,
                              std::size_t /*peer_bytes*/) noexcept {
    connection_ = &connection;
    // A user buffer is written by cross-memory attach; large rounds may then be pulled from here
    // too, while this side waits.
    if (location_.fd < 0 && bytes_ > 0 && settings().shm_cma && settings().shm_chunk > 0) {
        receiver_.share(offer_in(control_.get()), connection.peer_pid(), bytes_);
    }
}

} // namespace pmr::detail
