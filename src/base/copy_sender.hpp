// SPDX-License-Identifier: MIT
// The sending half of the copy channel (see channel.hpp), shared by self and shm. The sender's CPU
// does the one copy: inline through the control block for small messages, memcpy into the receive
// buffer when it is mapped here, cross-memory attach (process_vm_writev) into a user buffer of
// another process, or a staging area the receiver copies out of.
#pragma once

#include "base/copy.hpp"
#include "base/copy_channel.hpp"
#include "base/environment.hpp"
#include "base/error.hpp"

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <sys/types.h>
#include <sys/uio.h>

namespace pmr::detail {

/// Where the receiver's bytes go, as reachable from the sending process.
struct CopyTarget {
    copy_channel::ControlBlock* control = nullptr;
    std::byte* mapped = nullptr;  ///< receive buffer mapped here, or null
    std::byte* staging = nullptr; ///< staging area mapped here, or null
    std::uintptr_t remote_address = 0;
    pid_t pid = 0;
    bool cma = false; ///< may write the remote buffer by process_vm_writev
    std::size_t cma_threshold = 0;
};

class CopySender {
public:
    void attach(const CopyTarget& target, const std::string* where) noexcept {
        target_ = target;
        where_ = where;
    }

    /// Starts round n with `bytes` bytes at `source`; returns whether they were delivered.
    bool post(const std::byte* source, std::size_t bytes) {
        ++round_;
        source_ = source;
        bytes_ = bytes;
        pending_ = true;
        return progress();
    }

    /// Delivers a pending round if the receiver allows it; true once nothing is pending.
    bool progress() {
        if (!pending_) {
            return true;
        }
        copy_channel::ControlBlock& control = *target_.control;
        if (bytes_ <= copy_channel::inline_capacity) {
            // The slot of round n was last used by round n - slot_count, which the receiver has
            // finished once it granted round n - slot_count + 1.
            const std::uint64_t needed =
                round_ >= copy_channel::slot_count ? round_ - copy_channel::slot_count + 1 : 0;
            if (!granted(copy_channel::check_credit(control, needed, cached_credit_))) {
                return false;
            }
            copy_channel::publish_inline(control, round_, source_, bytes_);
        } else if (target_.mapped != nullptr) {
            if (!granted(copy_channel::check_credit(control, round_, cached_credit_))) {
                return false;
            }
            copy_to_peer(target_.mapped, source_, bytes_);
            copy_channel::publish(control, round_, bytes_, copy_channel::Delivery::direct);
        } else if (target_.cma && bytes_ >= target_.cma_threshold) {
            if (!granted(copy_channel::claim(control, round_))) {
                return false;
            }
            if (write_remote()) {
                copy_channel::publish(control, round_, bytes_, copy_channel::Delivery::direct);
                copy_channel::release_claim(control, round_);
            } else {
                copy_channel::release_claim(control, round_);
                stage(control);
            }
        } else {
            if (!granted(copy_channel::check_credit(control, round_, cached_credit_))) {
                return false;
            }
            stage(control);
        }
        pending_ = false;
        return true;
    }

    bool pending() const noexcept { return pending_; }

    /// Tells the receiver this window is gone, so its wait fails instead of hanging.
    void close() noexcept {
        if (target_.control != nullptr) {
            target_.control->sender_closed.store(1, std::memory_order_release);
        }
    }

private:
    bool granted(copy_channel::Credit credit) const {
        if (credit == copy_channel::Credit::revoked) {
            receiver_gone();
        }
        return credit == copy_channel::Credit::granted;
    }

    [[noreturn]] __attribute__((noinline, cold)) void receiver_gone() const {
        raise<PeerLost>("the peer destroyed its receive window", where(),
                        "Keep windows alive until both sides have finished their last round; "
                        "MPI_Finalize ends a process's windows.");
    }

    void stage(copy_channel::ControlBlock& control) {
        if (target_.staging == nullptr) {
            raise<ProviderError>("no path to the peer's receive buffer", where(),
                                 "Allocate the receive buffer with pmr::allocate or enable "
                                 "cross-memory attach (PMR_SHM_CMA=1).");
        }
        copy_to_peer(target_.staging, source_, bytes_);
        copy_channel::publish(control, round_, bytes_, copy_channel::Delivery::staged);
    }

    // Copies into the receiver's user buffer in its address space. Returns false (and stops using
    // CMA) if the kernel does not allow it here, so the caller falls back to staging.
    bool write_remote() {
        std::size_t done = 0;
        while (done < bytes_) {
            iovec local{const_cast<std::byte*>(source_ + done), bytes_ - done};
            // An address in the peer's address space: never dereferenced here.
            iovec remote{reinterpret_cast<void*>(target_.remote_address + done), // NOLINT
                         bytes_ - done};
            ssize_t n = process_vm_writev(target_.pid, &local, 1, &remote, 1, 0);
            if (n > 0) {
                done += static_cast<std::size_t>(n);
                continue;
            }
            const int error = n == 0 ? EFAULT : errno;
            if (error == EINTR) {
                continue;
            }
            if (done == 0 && (error == EPERM || error == ENOSYS || error == EACCES)) {
                target_.cma = false;
                debug_log("cross-memory attach not permitted, staging instead [" + where() + "]");
                return false;
            }
            if (error == ESRCH) {
                raise<PeerLost>("the peer process exited", where());
            }
            raise_system("process_vm_writev", error, where(),
                         "The peer's receive buffer must stay allocated while its window lives.");
        }
        return true;
    }

    std::string where() const { return where_ != nullptr ? *where_ : std::string(); }

    CopyTarget target_;
    const std::string* where_ = nullptr;
    const std::byte* source_ = nullptr;
    std::size_t bytes_ = 0;
    std::uint64_t round_ = 0;
    std::uint64_t cached_credit_ = 0;
    bool pending_ = false;
};

/// The receiving half: a round counter on a control block.
class CopyReceiver {
public:
    void attach(copy_channel::ControlBlock* control, std::byte* buffer,
                const std::byte* staging) noexcept {
        control_ = control;
        buffer_ = buffer;
        staging_ = staging;
    }
    void init() noexcept { copy_channel::grant(*control_, ++round_); }
    bool test() noexcept {
        return copy_channel::receive(*control_, round_, buffer_, staging_, bytes_);
    }
    std::size_t received_bytes() const noexcept { return bytes_; }
    bool sender_closed() const noexcept {
        return control_ != nullptr && control_->sender_closed.load(std::memory_order_acquire) != 0;
    }
    copy_channel::ControlBlock* control() const noexcept { return control_; }

private:
    copy_channel::ControlBlock* control_ = nullptr;
    std::byte* buffer_ = nullptr;
    const std::byte* staging_ = nullptr;
    std::uint64_t round_ = 0;
    std::size_t bytes_ = 0;
};

} // namespace pmr::detail
