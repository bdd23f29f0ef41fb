// SPDX-License-Identifier: MIT
#include "base/peer_process.hpp"

#include <cerrno>
#include <csignal>
#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <utility>

namespace pmr::detail {

PeerProcess::PeerProcess(pid_t pid) noexcept
    : pid_(pid), pidfd_(pid > 0 ? static_cast<int>(syscall(SYS_pidfd_open, pid, 0)) : -1) {}

PeerProcess::PeerProcess(PeerProcess&& other) noexcept
    : pid_(other.pid_), pidfd_(std::exchange(other.pidfd_, -1)) {}

PeerProcess& PeerProcess::operator=(PeerProcess&& other) noexcept {
    if (this != &other) {
        if (pidfd_ >= 0) {
            close(pidfd_);
        }
        pid_ = other.pid_;
        pidfd_ = std::exchange(other.pidfd_, -1);
    }
    return *this;
}

PeerProcess::~PeerProcess() {
    if (pidfd_ >= 0) {
        close(pidfd_);
    }
}

bool PeerProcess::alive() const noexcept {
    if (pid_ <= 0) {
        return true;
    }
    if (pidfd_ >= 0) {
        pollfd p{pidfd_, POLLIN, 0};
        return poll(&p, 1, 0) == 0; // readable once the process has exited
    }
    return kill(pid_, 0) == 0 || errno != ESRCH;
}

} // namespace pmr::detail
