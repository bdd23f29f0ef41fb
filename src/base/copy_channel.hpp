// SPDX-License-Identifier: MIT
// The copy channel shared by the providers in which the sender's CPU writes straight into the
// receiver's memory (self, shm): a control block owned by the receive window, and the protocol on
// it.
//
// Protocol, for round n (both sides count rounds from 1):
//   receiver init(n):  credit := n                   (release: "my buffer is yours")
//   sender post(n):    small message: copy into inline slot n % slots, needs credit >= n - slots +
//   1
//                      otherwise:     needs credit >= n, copy into the buffer (or staging area)
//                      then slot.bytes, slot.delivery, slot.sequence := n   (release)
//   receiver wait(n):  slot(n).sequence == n         (acquire), copy inline/staged data out
// Small messages never wait for the receiver's init: they land in a slot the receiver has finished
// with, so the sender rarely reads the credit line, and one cache line carries both the signal and
// the data. The receive buffer itself is only written between the receiver's init() and wait().
#pragma once

#include <pmr/memory.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace pmr::detail::copy_channel {

inline constexpr std::size_t cache_line = 64;
inline constexpr std::size_t slot_count = 4;
inline constexpr std::size_t slot_bytes = 4 * cache_line;

/// How the payload of a round reached the receiver.
enum class Delivery : std::uint32_t {
    direct = 0,  ///< written into the receive buffer
    inlined = 1, ///< in the slot; the receiver copies it out
    staged = 2,  ///< in the staging area; the receiver copies it out
};

struct alignas(cache_line) Slot {
    std::atomic<std::uint64_t> sequence{0};
    std::uint64_t bytes = 0;
    Delivery delivery = Delivery::direct;
    std::uint32_t reserved = 0;
    unsigned char data[slot_bytes - 24];
};
static_assert(sizeof(Slot) == slot_bytes);

inline constexpr std::size_t inline_capacity = sizeof(Slot::data);

/// Credit word values beyond round numbers.
inline constexpr std::uint64_t claimed_bit = std::uint64_t{1} << 62; // a copy into the buffer runs
inline constexpr std::uint64_t revoked_credit = std::uint64_t{1} << 63; // receive window gone

/// Lives in memory both processes map; only lock-free atomics and plain bytes.
struct ControlBlock {
    // Written by the receiver, read by the sender.
    alignas(cache_line) std::atomic<std::uint64_t> credit{0};
    // Written by the sender.
    Slot slots[slot_count];
    alignas(cache_line) std::atomic<std::uint32_t> sender_closed{0};
};
static_assert(std::atomic<std::uint64_t>::is_always_lock_free);
static_assert(std::atomic<std::uint32_t>::is_always_lock_free);
static_assert(sizeof(ControlBlock) <= 4096, "the control block must fit one page");

inline Slot& slot_of(ControlBlock& block, std::uint64_t round) noexcept {
    return block.slots[round % slot_count];
}

// ---------------------------------------------------------------------------------------------
// Receiver side
// ---------------------------------------------------------------------------------------------

inline void grant(ControlBlock& block, std::uint64_t round) noexcept {
    block.credit.store(round, std::memory_order_release);
}

/// Whether round `round` has arrived; if so, copies inline/staged payload into `buffer` and
/// sets `bytes`.
inline bool receive(ControlBlock& block, std::uint64_t round, std::byte* buffer,
                    const std::byte* staging, std::size_t& bytes) noexcept {
    Slot& slot = slot_of(block, round);
    if (slot.sequence.load(std::memory_order_acquire) != round) {
        return false;
    }
    bytes = static_cast<std::size_t>(slot.bytes);
    if (bytes == 0) {
        return true; // an empty window may have no buffer at all
    }
    if (slot.delivery == Delivery::inlined) {
        std::memcpy(buffer, slot.data, bytes);
    } else if (slot.delivery == Delivery::staged) {
        copy_bytes(buffer, staging, bytes);
    }
    return true;
}

/// Withdraws the credit of a receive window being destroyed. Returns the round whose copy into the
/// buffer is still running (the caller waits for its sequence), or 0.
inline std::uint64_t revoke(ControlBlock& block) noexcept {
    std::uint64_t credit = block.credit.load(std::memory_order_acquire);
    for (;;) {
        if ((credit & claimed_bit) != 0) {
            return credit & ~claimed_bit;
        }
        if (block.credit.compare_exchange_weak(credit, revoked_credit, std::memory_order_acq_rel,
                                               std::memory_order_acquire)) {
            return 0;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Sender side
// ---------------------------------------------------------------------------------------------

enum class Credit { granted, not_yet, revoked };

/// Reads the credit word, refreshing `cached` (the sender's last seen value) only when needed.
inline Credit check_credit(const ControlBlock& block, std::uint64_t needed,
                           std::uint64_t& cached) noexcept {
    if (cached >= needed) {
        return Credit::granted;
    }
    std::uint64_t credit = block.credit.load(std::memory_order_acquire);
    if (credit == revoked_credit) {
        return Credit::revoked;
    }
    cached = credit & ~claimed_bit;
    return cached >= needed ? Credit::granted : Credit::not_yet;
}

/// Takes the credit of `round` exclusively, for copies the receiver must be able to wait out when
/// it destroys its window (cross-memory attach into a user buffer).
inline Credit claim(ControlBlock& block, std::uint64_t round) noexcept {
    std::uint64_t credit = block.credit.load(std::memory_order_acquire);
    for (;;) {
        if (credit == revoked_credit) {
            return Credit::revoked;
        }
        if (credit != round) {
            return Credit::not_yet;
        }
        if (block.credit.compare_exchange_weak(credit, round | claimed_bit,
                                               std::memory_order_acq_rel,
                                               std::memory_order_acquire)) {
            return Credit::granted;
        }
    }
}

/// Ends a claim taken with claim(); the receiver may now revoke.
inline void release_claim(ControlBlock& block, std::uint64_t round) noexcept {
    std::uint64_t expected = round | claimed_bit;
    block.credit.compare_exchange_strong(expected, round, std::memory_order_acq_rel);
}

inline void publish(ControlBlock& block, std::uint64_t round, std::size_t bytes,
                    Delivery delivery) noexcept {
    Slot& slot = slot_of(block, round);
    slot.bytes = bytes;
    slot.delivery = delivery;
    slot.sequence.store(round, std::memory_order_release);
}

// ---------------------------------------------------------------------------------------------
// Shared copies (cross-memory attach into a user buffer, shm only)
// ---------------------------------------------------------------------------------------------
//
// A large round into a user buffer is cut into chunks that either process may copy: the sender
// writes chunks into the receiver's buffer (process_vm_writev) while it holds the round's credit,
// and the receiver, while it waits, reads chunks out of the sender's buffer (process_vm_readv).
// Whoever runs moves the data: with more ranks than cores the transfer no longer waits for the
// sender to be scheduled, and with a core each both copy at once. The protocol, for round n:
//   sender post(n):   offer := source, bytes, chunk size; done := 0; claims := (n, chunks, 0)
//   either side:      take chunk k by compare-and-swap on claims (n, chunks, k -> k + 1), copy it,
//                     done |= bit k; the side whose bit completes `done` publishes slot n
//   sender close():   claims := (n, chunks, retracted); waits for chunks already taken
// The receiver takes chunks only between its init(n) and the end of round n, so its buffer is
// written only while it is granted; the sender copies only while it holds the credit claim. The
// offer's fields are read only after a successful take, when round n cannot end (a taken chunk is
// not done) and the sender cannot offer round n + 1. A receiver that cannot read the sender's
// memory returns the chunk it took (returned |= bit k) and stops taking; the sender copies it.

/// The sender's offer of its current round; lives in memory both processes map.
struct alignas(cache_line) Offer {
    /// round << 16 | chunks << 8 | next chunk to take (`retracted`: none may be taken)
    std::atomic<std::uint64_t> claims{0};
    std::atomic<std::uint64_t> done{0}; ///< bit k: chunk k has been copied
    std::atomic<std::uint64_t> returned{
        0}; ///< bit k: taken by the receiver, which could not copy it
    std::atomic<std::uint32_t> receiver_stopped{0}; ///< the receiver no longer takes chunks
    std::uint64_t source = 0; ///< the sender's buffer, in the sender's address space
    std::uint64_t bytes = 0;
    std::uint64_t chunk = 0; ///< bytes per chunk; the last one may be shorter
};
static_assert(sizeof(Offer) == cache_line);

inline constexpr std::uint64_t max_chunks = 64;
inline constexpr std::uint64_t retracted = 0xff;
inline constexpr std::uint64_t round_mask = (std::uint64_t{1} << 48) - 1;

inline std::uint64_t chunk_mask(std::uint64_t chunks) noexcept {
    return chunks >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << chunks) - 1;
}

/// The sender offers round `round` of `bytes` bytes at `source`, in chunks of `chunk` bytes (at
/// most max_chunks of them). The previous round must have ended.
inline void offer(Offer& offer, std::uint64_t round, std::uint64_t source, std::uint64_t bytes,
                  std::uint64_t chunk) noexcept {
    const std::uint64_t chunks = (bytes + chunk - 1) / chunk;
    offer.source = source;
    offer.bytes = bytes;
    offer.chunk = chunk;
    offer.done.store(0, std::memory_order_relaxed);
    offer.returned.store(0, std::memory_order_relaxed);
    offer.claims.store((round & round_mask) << 16 | chunks << 8, std::memory_order_release);
}

/// Takes the next chunk of round `round`; false when none is left to take.
inline bool take_chunk(Offer& offer, std::uint64_t round, std::uint64_t& index) noexcept {
    std::uint64_t claims = offer.claims.load(std::memory_order_acquire);
    for (;;) {
        if ((claims >> 16) != (round & round_mask)) {
            return false;
        }
        const std::uint64_t next = claims & 0xff;
        if (next >= ((claims >> 8) & 0xff)) {
            return false; // all taken, or retracted
        }
        if (offer.claims.compare_exchange_weak(claims, claims + 1, std::memory_order_acq_rel,
                                               std::memory_order_acquire)) {
            index = next;
            return true;
        }
    }
}

/// Marks chunk `index` of a round of `chunks` chunks copied; true for the caller whose chunk
/// completed the round, which then publishes it.
inline bool chunk_done(Offer& offer, std::uint64_t index, std::uint64_t chunks) noexcept {
    const std::uint64_t bit = std::uint64_t{1} << index;
    const std::uint64_t before = offer.done.fetch_or(bit, std::memory_order_acq_rel);
    return (before & bit) == 0 && ((before | bit) & chunk_mask(chunks)) == chunk_mask(chunks);
}

/// Stops further takes of round `round`; returns the mask of the chunks taken before.
inline std::uint64_t retract(Offer& offer, std::uint64_t round) noexcept {
    std::uint64_t claims = offer.claims.load(std::memory_order_acquire);
    for (;;) {
        if ((claims >> 16) != (round & round_mask)) {
            return 0;
        }
        const std::uint64_t next = claims & 0xff;
        if (next == retracted) {
            return 0;
        }
        if (offer.claims.compare_exchange_weak(claims, (claims & ~std::uint64_t{0xff}) | retracted,
                                               std::memory_order_acq_rel,
                                               std::memory_order_acquire)) {
            return chunk_mask(next);
        }
    }
}

inline void publish_inline(ControlBlock& block, std::uint64_t round, const std::byte* source,
                           std::size_t bytes) noexcept {
    Slot& slot = slot_of(block, round);
    if (bytes > 0) {
        std::memcpy(slot.data, source, bytes);
    }
    publish(block, round, bytes, Delivery::inlined);
}

} // namespace pmr::detail::copy_channel
