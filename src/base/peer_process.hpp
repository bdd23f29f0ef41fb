// SPDX-License-Identifier: MIT
// Watching a process on this node: a pidfd, which tells reliably when the process exits even if
// its pid is reused; kill(pid, 0) where the kernel has no pidfd_open.
#pragma once

#include <sys/types.h>

namespace pmr::detail {

class PeerProcess {
public:
    PeerProcess() noexcept = default;
    /// Starts watching `pid` (a process on this node); pid <= 0 watches nothing (always alive).
    explicit PeerProcess(pid_t pid) noexcept;
    PeerProcess(const PeerProcess&) = delete;
    PeerProcess& operator=(const PeerProcess&) = delete;
    PeerProcess(PeerProcess&& other) noexcept;
    PeerProcess& operator=(PeerProcess&& other) noexcept;
    ~PeerProcess();

    /// False once the process has exited. One poll(2) with a zero timeout.
    bool alive() const noexcept;
    pid_t pid() const noexcept { return pid_; }

private:
    pid_t pid_ = 0;
    int pidfd_ = -1;
};

} // namespace pmr::detail
