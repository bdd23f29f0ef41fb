// SPDX-License-Identifier: MIT
// The two halves of the copy channel (see copy_channel.hpp), shared by self and shm. The sender's
// CPU does the one copy: inline through the control block for small messages, memcpy into the
// receive buffer when it is mapped here, cross-memory attach (process_vm_writev) into a user buffer
// of another process, or a staging area the receiver copies out of. Large rounds into a user buffer
// may be shared: the sender offers them in chunks and the waiting receiver pulls the chunks the
// sender has not taken (process_vm_readv), see "Shared copies" in copy_channel.hpp.
#pragma once

#include "base/backoff.hpp"
#include "base/blob.hpp"
#include "base/copy.hpp"
#include "base/copy_channel.hpp"
#include "base/environment.hpp"
#include "base/error.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
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
    /// Where large CMA rounds are offered for the receiver to share, or null: never shared.
    copy_channel::Offer* offer = nullptr;
    std::size_t min_chunk = 0; ///< smallest chunk of a shared round; rounds of two and more share
};

/// Bytes per chunk of a shared round of `bytes` bytes: at least `min_chunk`, whole pages, and at
/// most copy_channel::max_chunks chunks.
inline std::size_t shared_chunk(std::size_t bytes, std::size_t min_chunk) noexcept {
    constexpr std::size_t page = 4096;
    const std::size_t even = (bytes + copy_channel::max_chunks - 1) / copy_channel::max_chunks;
    return std::max(min_chunk, (even + page - 1) / page * page);
}

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
        shared_ = false;
        if (target_.offer != nullptr && cma_proven_ && target_.cma && target_.mapped == nullptr &&
            bytes >= 2 * target_.min_chunk && bytes >= target_.cma_threshold) {
            // Offered before the credit is there: a receiver that inits later pulls at once.
            chunk_ = shared_chunk(bytes, target_.min_chunk);
            chunks_ = (bytes + chunk_ - 1) / chunk_;
            copy_channel::offer(*target_.offer, round_, reinterpret_cast<std::uintptr_t>(source),
                                bytes, chunk_);
            shared_ = true;
        }
        return progress();
    }

    /// Delivers a pending round if the receiver allows it; true once nothing is pending.
    bool progress() {
        if (!pending_) {
            return true;
        }
        if (shared_) {
            return progress_shared();
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
            if (write_remote(0, bytes_)) {
                cma_proven_ = true;
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

    /// Tells the receiver this window is gone, so its wait fails instead of hanging. A shared
    /// round still running is retracted first, and the chunks the receiver is reading out of
    /// this process are waited for (bounded), so that the source may be freed on return.
    void close() noexcept {
        if (pending_ && shared_) {
            copy_channel::Offer& offer = *target_.offer;
            const std::uint64_t taken = copy_channel::retract(offer, round_);
            Backoff backoff;
            while (((offer.done.load(std::memory_order_acquire) |
                     offer.returned.load(std::memory_order_acquire)) &
                    taken) != taken) {
                if (backoff.pause() && (backoff.elapsed_seconds() > 10.0 ||
                                        (kill(target_.pid, 0) != 0 && errno == ESRCH))) {
                    break;
                }
            }
        }
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

    // A shared round: copy the chunks nobody has taken while holding the credit claim, and those
    // the receiver gave back; done once the round is published (by whichever side finished it).
    bool progress_shared() {
        copy_channel::ControlBlock& control = *target_.control;
        const copy_channel::Slot& slot = copy_channel::slot_of(control, round_);
        if (slot.sequence.load(std::memory_order_acquire) == round_) {
            pending_ = false;
            return true;
        }
        const copy_channel::Credit credit = copy_channel::claim(control, round_);
        if (credit == copy_channel::Credit::revoked) {
            // The receiver may have pulled the whole round and destroyed its window since.
            if (slot.sequence.load(std::memory_order_acquire) == round_) {
                pending_ = false;
                return true;
            }
            receiver_gone();
        }
        if (credit == copy_channel::Credit::granted) {
            copy_channel::Offer& offer = *target_.offer;
            std::uint64_t chunk = 0;
            while (copy_channel::take_chunk(offer, round_, chunk)) {
                if (chunk < chunks_) { // the count in shared memory is not trusted
                    copy_chunk(chunk);
                }
            }
            if (offer.receiver_stopped.load(std::memory_order_acquire) != 0) {
                std::uint64_t back = offer.returned.exchange(0, std::memory_order_acq_rel) &
                                     copy_channel::chunk_mask(chunks_);
                for (; back != 0; back &= back - 1) {
                    copy_chunk(static_cast<std::uint64_t>(__builtin_ctzll(back)));
                }
            }
            copy_channel::release_claim(control, round_);
        }
        if (slot.sequence.load(std::memory_order_acquire) == round_) {
            pending_ = false;
            return true;
        }
        return false;
    }

    void copy_chunk(std::uint64_t index) {
        const std::size_t offset = static_cast<std::size_t>(index) * chunk_;
        write_remote(offset, std::min(chunk_, bytes_ - offset));
        if (copy_channel::chunk_done(*target_.offer, index, chunks_)) {
            copy_channel::publish(*target_.control, round_, bytes_, copy_channel::Delivery::direct);
        }
    }

    // Copies bytes [offset, offset + bytes) of the round into the receiver's user buffer in its
    // address space. Returns false (and stops using CMA) if the kernel does not allow it here, so
    // the caller falls back to staging.
    bool write_remote(std::size_t offset, std::size_t bytes) {
        std::size_t done = 0;
        while (done < bytes) {
            iovec local{const_cast<std::byte*>(source_ + offset + done), bytes - done};
            // An address in the peer's address space: never dereferenced here.
            iovec remote{reinterpret_cast<void*>(target_.remote_address + offset + done), // NOLINT
                         bytes - done};
            ssize_t n = process_vm_writev(target_.pid, &local, 1, &remote, 1, 0);
            if (n > 0) {
                done += static_cast<std::size_t>(n);
                continue;
            }
            const int error = n == 0 ? EFAULT : errno;
            if (error == EINTR) {
                continue;
            }
            if (!cma_proven_ && done == 0 &&
                (error == EPERM || error == ENOSYS || error == EACCES)) {
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
    std::size_t chunk_ = 0;  ///< of the shared round
    std::size_t chunks_ = 0; ///< of the shared round
    bool pending_ = false;
    bool shared_ = false;     ///< the pending round is offered (see progress_shared)
    bool cma_proven_ = false; ///< a CMA copy into the receiver worked: rounds may be shared
};

/// A CopySender that tells the receiver it is gone when it goes (close()). Declared as a window's
/// last member, it closes before the memory it writes into (the window's mappings) is unmapped.
class ClosingCopySender : public CopySender {
public:
    ClosingCopySender() = default;
    ClosingCopySender(const ClosingCopySender&) = delete;
    ClosingCopySender& operator=(const ClosingCopySender&) = delete;
    ClosingCopySender(ClosingCopySender&&) noexcept = default;
    ClosingCopySender& operator=(ClosingCopySender&&) noexcept = default;
    ~ClosingCopySender() { close(); }
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
    /// Lets this receiver pull chunks of the rounds that sender process `pid` offers into this
    /// window's user buffer of `capacity` bytes.
    void share(copy_channel::Offer* offer, pid_t sender, std::size_t capacity) noexcept {
        offer_ = offer;
        sender_ = sender;
        capacity_ = capacity;
    }
    void init() noexcept { copy_channel::grant(*control_, ++round_); }
    bool test() noexcept {
        if (copy_channel::receive(*control_, round_, buffer_, staging_, bytes_)) {
            return true;
        }
        if (offer_ == nullptr) {
            return false;
        }
        pull();
        return copy_channel::receive(*control_, round_, buffer_, staging_, bytes_);
    }
    std::size_t received_bytes() const noexcept { return bytes_; }
    bool sender_closed() const noexcept {
        return control_ != nullptr && control_->sender_closed.load(std::memory_order_acquire) != 0;
    }
    copy_channel::ControlBlock* control() const noexcept { return control_; }

private:
    // Copies the chunks of the current round that nobody has taken yet out of the sender's buffer.
    void pull() noexcept {
        copy_channel::Offer& offer = *offer_;
        std::uint64_t index = 0;
        while (copy_channel::take_chunk(offer, round_, index)) {
            // Stable while the chunk is taken: the round cannot end and no new one be offered.
            const std::uint64_t chunk = offer.chunk;
            const std::uint64_t bytes = offer.bytes;
            const std::uint64_t chunks = chunk == 0 ? 0 : (bytes + chunk - 1) / chunk;
            const std::uint64_t offset = index * chunk;
            // A sender that describes more than this window holds gets its chunk back.
            if (chunk < 4096 || bytes > capacity_ || chunks > copy_channel::max_chunks ||
                index >= chunks ||
                !read_remote(buffer_ + offset, offer.source + offset,
                             static_cast<std::size_t>(std::min(chunk, bytes - offset)))) {
                if (index < copy_channel::max_chunks) {
                    offer.returned.fetch_or(std::uint64_t{1} << index, std::memory_order_acq_rel);
                }
                offer.receiver_stopped.store(1, std::memory_order_release);
                offer_ = nullptr; // never again in this window
                return;
            }
            if (copy_channel::chunk_done(offer, index, chunks)) {
                copy_channel::publish(*control_, round_, static_cast<std::size_t>(bytes),
                                      copy_channel::Delivery::direct);
            }
        }
    }

    bool read_remote(std::byte* destination, std::uint64_t source, std::size_t bytes) noexcept {
        std::size_t done = 0;
        while (done < bytes) {
            iovec local{destination + done, bytes - done};
            // An address in the sender's address space: never dereferenced here.
            iovec remote{reinterpret_cast<void*>(source + done), bytes - done}; // NOLINT
            const ssize_t n = process_vm_readv(sender_, &local, 1, &remote, 1, 0);
            if (n > 0) {
                done += static_cast<std::size_t>(n);
            } else if (n < 0 && errno == EINTR) {
                continue;
            } else {
                return false;
            }
        }
        return true;
    }

    copy_channel::ControlBlock* control_ = nullptr;
    std::byte* buffer_ = nullptr;
    const std::byte* staging_ = nullptr;
    copy_channel::Offer* offer_ = nullptr; ///< rounds shared with the sender, or null
    pid_t sender_ = 0;
    std::size_t capacity_ = 0;
    std::uint64_t round_ = 0;
    std::size_t bytes_ = 0;
};

/// What a send window answers from its CopySender (self, shm), for the window to derive from
/// (CRTP). The window keeps the sender as its member `sender_`, declared last (ClosingCopySender),
/// and befriends this class.
template <class Window>
class CopySenderCalls {
public:
    Blob describe() const { return {}; }
    void post(const std::byte* data, std::size_t bytes) { sender().post(data, bytes); }
    bool test() { return sender().progress(); }
    bool peer_gone() const noexcept { return false; }

private:
    CopySender& sender() noexcept { return static_cast<Window&>(*this).sender_; }
};

/// What a receive window answers from its CopyReceiver (self, shm), for the window to derive
/// from. The receiver holds no resources: it may go after the window's members.
class CopyReceiverCalls {
public:
    void init() noexcept { receiver_.init(); }
    bool test() noexcept { return receiver_.test(); }
    std::size_t received_bytes() const noexcept { return receiver_.received_bytes(); }
    bool peer_gone() const noexcept { return receiver_.sender_closed(); }

protected:
    CopyReceiver receiver_;
};

} // namespace pmr::detail
