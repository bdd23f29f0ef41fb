// SPDX-License-Identifier: MIT
#include "providers/shm/shm.hpp"

#include "core/backoff.hpp"

#include <cerrno>
#include <csignal>
#include <new>
#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <utility>

namespace pmr::detail {
namespace {

constexpr std::size_t control_bytes = 4096;

// Layout of a receive window's description, as sent to the sender.
struct Description {
    std::int32_t pid;
    std::int32_t control_fd;
    std::int32_t buffer_fd; // -1: the buffer is not pmr memory
    std::int32_t has_staging;
    std::uint64_t buffer_offset;
    std::uint64_t address;
    std::uint64_t bytes;
};

} // namespace

Shm::Connection::Connection(const ConnectionSetup& setup, const PeerInfo& peer,
                            const Blob& /*hello*/)
    : pid_(peer.pid) {
    if (!peer.same_node) {
        raise<ProviderError>("shared memory cannot reach a peer on another node (" + peer.node +
                                 ")",
                             setup.where, "Unset PMR_PROVIDER=shm or use a network provider.");
    }
    // A pidfd tells reliably when the peer exits, even if its pid is reused; kill(pid, 0) is the
    // fallback on kernels without pidfd_open.
    pidfd_ = static_cast<int>(syscall(SYS_pidfd_open, pid_, 0));
}

Shm::Connection::Connection(Connection&& other) noexcept
    : pid_(other.pid_), pidfd_(std::exchange(other.pidfd_, -1)) {}

Shm::Connection::~Connection() {
    if (pidfd_ >= 0) {
        close(pidfd_);
    }
}

bool Shm::Connection::peer_alive() const noexcept {
    if (pidfd_ >= 0) {
        pollfd p{pidfd_, POLLIN, 0};
        return poll(&p, 1, 0) == 0; // readable once the process has exited
    }
    return kill(pid_, 0) == 0 || errno != ESRCH;
}

Shm::SendWindow::SendWindow(const WindowSpec& spec) noexcept : where_(spec.where) {}

void Shm::SendWindow::connect(Connection& connection, const Blob& peer) {
    BlobReader reader(peer);
    const auto d = reader.get<Description>();
    const pid_t pid = connection.peer_pid();
    const std::size_t staging = d.has_staging != 0 ? d.bytes : 0;
    control_ = SharedMapping::open(pid, d.control_fd, 0, control_bytes + staging, where_->c_str());
    CopyTarget target;
    target.control = reinterpret_cast<channel::ControlBlock*>(control_.data());
    target.staging = d.has_staging != 0 ? control_.data() + control_bytes : nullptr;
    if (d.buffer_fd >= 0 && d.bytes > 0) {
        buffer_ = SharedMapping::open(pid, d.buffer_fd, d.buffer_offset, d.bytes, where_->c_str());
        target.mapped = buffer_.data();
    }
    target.remote_address = d.address;
    target.pid = pid;
    target.cma = settings().shm_cma;
    target.cma_threshold = settings().shm_cma_threshold;
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
    auto* control = new (control_.data()) channel::ControlBlock();
    receiver_.attach(control, spec.buffer, staging ? control_.data() + control_bytes : nullptr);
}

Shm::RecvWindow::~RecvWindow() {
    channel::ControlBlock* control = receiver_.control();
    if (control == nullptr || !control_) {
        return; // moved from
    }
    // A sender may be copying into our user buffer right now (cross-memory attach): wait until it
    // is done before the buffer can be freed. Bounded, and abandoned if the peer has died.
    Backoff backoff;
    while (channel::revoke(*control) != 0) {
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

void Shm::RecvWindow::connect(Connection& connection, const Blob& /*peer*/) noexcept {
    connection_ = &connection;
}

} // namespace pmr::detail
