// SPDX-License-Identifier: MIT
#include "providers/shm/shm.hpp"

#include "base/backoff.hpp"

#include <cerrno>
#include <limits>
#include <new>
#include <unistd.h>
#include <utility>

namespace pmr::detail {
namespace {

constexpr std::size_t control_bytes = 4096;
// The offer of shared copies (copy_channel.hpp) behind the control block, in the same page.
constexpr std::size_t offer_offset = 2048;
static_assert(sizeof(copy_channel::ControlBlock) <= offer_offset);
static_assert(offer_offset + sizeof(copy_channel::Offer) <= control_bytes);

copy_channel::Offer* offer_in(std::byte* control) noexcept {
    return reinterpret_cast<copy_channel::Offer*>(control + offer_offset);
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
    if (d.control_fd < 0 || d.buffer_fd < -1 || (d.has_staging != 0 && d.has_staging != 1)) {
        reader.malformed("bad descriptors (" + std::to_string(d.control_fd) + ", " +
                         std::to_string(d.buffer_fd) + ")");
    }
    // The receiver stages exactly when its buffer is not pmr memory and not empty.
    if ((d.has_staging == 1) != (d.buffer_fd < 0 && d.bytes > 0)) {
        reader.malformed("a staging area that does not fit the buffer");
    }
    if (d.buffer_fd >= 0 && d.buffer_offset > std::numeric_limits<std::uint64_t>::max() - d.bytes) {
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
}

Shm::SendWindow::SendWindow(const WindowSpec& spec) noexcept : where_(spec.where) {}

void Shm::SendWindow::connect(Connection& connection, const Blob& peer, std::size_t peer_bytes) {
    const pid_t pid = connection.peer_pid();
    const Description d = parse_description(peer, pid, peer_bytes, *where_);
    const std::size_t staging = d.has_staging != 0 ? d.bytes : 0;
    control_ = SharedMapping::open(pid, d.control_fd, 0, control_bytes + staging, where_->c_str());
    CopyTarget target;
    target.control = reinterpret_cast<copy_channel::ControlBlock*>(control_.data());
    target.staging = d.has_staging != 0 ? control_.data() + control_bytes : nullptr;
    if (d.buffer_fd >= 0 && d.bytes > 0) {
        buffer_ = SharedMapping::open(pid, d.buffer_fd, d.buffer_offset, d.bytes, where_->c_str());
        target.mapped = buffer_.data();
    }
    target.remote_address = d.address;
    target.pid = pid;
    target.cma = settings().shm_cma;
    target.cma_threshold = settings().shm_cma_threshold;
    if (target.mapped == nullptr && settings().shm_chunk > 0) {
        target.offer = offer_in(control_.data());
        target.min_chunk = settings().shm_chunk;
    }
    sender_.attach(target, where_);
    debug_log(std::string(target.mapped != nullptr ? "direct copies into pmr memory"
                          : target.cma             ? "cross-memory attach above threshold"
                                                   : "staging copies") +
              " [" + *where_ + "]");
}

Shm::RecvWindow::RecvWindow(const WindowSpec& spec)
    : location_(locate(spec.buffer, spec.bytes)),
      address_(reinterpret_cast<std::uintptr_t>(spec.buffer)), bytes_(spec.bytes) {
    const bool staging = location_.fd < 0 && spec.bytes > 0;
    control_ =
        SharedMapping::create(control_bytes + (staging ? spec.bytes : 0), spec.where->c_str());
    auto* control = new (control_.data()) copy_channel::ControlBlock();
    new (control_.data() + offer_offset) copy_channel::Offer();
    receiver_.attach(control, spec.buffer, staging ? control_.data() + control_bytes : nullptr);
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
}

Blob Shm::RecvWindow::describe() const {
    Description d{};
    d.pid = static_cast<std::int32_t>(getpid());
    d.control_fd = control_.fd();
    d.buffer_fd = location_.fd;
    d.has_staging = location_.fd < 0 && bytes_ > 0 ? 1 : 0;
    d.buffer_offset = location_.offset;
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
        receiver_.share(offer_in(control_.data()), connection.peer_pid(), bytes_);
    }
}

} // namespace pmr::detail
