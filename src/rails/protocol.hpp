// SPDX-License-Identifier: MIT
// The shared protocol of providers with rails (ucx, tofu, verbs): what lives in registered memory
// and what travels between windows. The state machines over it are in put_path.hpp (contract.hpp,
// sender.hpp, receiver.hpp).
//
// A receive window owns an inbox in registered memory: the control block of the copy channel (its
// slots carry the round's header and small messages inline; its credit word serves senders that
// map the inbox and store into it) and one word per rail for multi-rail rounds. A send window owns
// a credit cell, one cache line of registered memory the receiver puts its credits into.
//
// Round n of the put path:
//   receiver init(n):  puts credit n into the sender's cell (and stores it in its own inbox)
//   sender post(n):    waits for credit >= n; puts the payload (pieces over their rails) into the
//                      receive buffer, or up to inline_capacity bytes into slot n % slots;
//                      rail r > 0 that carried pieces: fence, then rail_round[r] := n (or an
//                      `arrived` notice on that rail); rail 0: fence, then the slot header and
//                      sequence := n (or an `arrived` notice that carries the header and small
//                      payloads)
//   receiver wait(n):  slot(n).sequence == n and rail_round[r] == n for the rails in the slot's
//                      mask (acquire loads), then copies inline payloads out.
// Notices are small messages addressed by window id and dispatched through the registry
// (registry.hpp), so a notice for a window that is gone is dropped instead of writing freed memory.
//
// Round n of the message path (transports whose puts are emulated by messages, e.g. UCX over TCP,
// where a put, a fence and a sequence word cost several messages and a round trip):
//   receiver init(n):  a `credit` notice to the sender, which stores n in its cell
//   sender post(n):    waits for credit >= n; up to inline_capacity bytes travel inside an
//                      `arrived` notice; larger messages as one Piece message per rail that carries
//                      pieces, with the data (the transport may deliver it by rendezvous straight
//                      into the receive buffer), or a piece that goes eagerly as several Piece
//                      messages of at most the transport's chunk size each; no fence
//   receiver:          the registry copies (or the transport receives) each piece into the buffer
//                      and publishes the slot of round n once all bytes of the round have landed.
//
// Small rounds run ahead of the credits on the message path, as eager MPI sends do: those that
// fit a notice, and every round of a receive window up to ahead_bytes whose pieces the transport
// delivers eagerly. Such a round needs credit n - ahead_rounds, not n. A message of a round the
// receiver has not begun (init) waits in the registry, at most ahead_rounds rounds per window,
// which copies it into the buffer when the receiver begins the round (Registry::grant); the
// sender marks it `early_flag` (a message of a round the receiver has begun lands as before).
// A sender that runs every round of the window ahead marks its messages `ahead_flag`; a receiver
// that has seen the flag sends the credit of every credit_interval-th round only, and sends it in
// its next test() rather than in init(), behind the data its thread posts in between (where no
// CreditCarrier takes it, below). That never stalls the sender where the strict protocol would
// not: a receiver that has begun round m >= n has sent a credit >= m - credit_interval >=
// n - ahead_rounds. Over TCP it saves seven of eight credit messages and takes them out of a
// ping-pong's critical path. What changes for the application: such a send completes before the
// receiver has begun the round (as on shm for inline rounds), so a receive window destroyed
// meanwhile, or a dead peer, shows in the sender's wait only once it needs a credit again, at
// most ahead_rounds rounds later; the rounds in between are dropped. Such a piece always goes
// eagerly (a rendezvous would write into the buffer at once). (Only on the message path: a put
// ahead of the credit could write into an inbox that its receiver is freeing, while the registry
// drops a message for a window that is gone.)
//
// Where the transport's connections have a CreditCarrier, such a receiver leaves its credit there
// instead (round c, a multiple of credit_interval; in test() as above where the carrier is full),
// and the next data message of the same connection side to the peer carries it
// (`Notice::credit_target`, `credit_round`): the inline `arrived` notice or the first eager
// rail-0 piece of a message-path round, of any send window. In a halo exchange, or a ping-pong's
// reply, data goes back to the peer every round, so the credit costs no message of its own. A
// send that throws puts the credit back. A credit nobody carried by the receiver's init of round
// c + 2 goes as a notice then; so at its init of round m >= n the receiver has sent a credit >=
// m - 9 >= n - ahead_rounds, and the argument above holds. The peer's registry applies a carried
// credit when the message arrives, before anything else and whether or not the message's own
// window still exists. A credit addresses its send window by id and only ever raises its cell: one
// that arrives after the receiver_closed notice (on another rail, or carried by another thread's
// message just before the receiver took it back) finds the window gone, or its cell revoked, and
// changes nothing.
#pragma once

#include "base/copy_channel.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>

namespace pmr::detail::rails {

inline constexpr std::size_t max_rails = 16;

/// A credit cell: one cache line of rail-0 registered memory in which a send window receives the
/// receiver's credits (by put, or by store where the receiver can map it).
struct CreditCell {
    std::atomic<std::uint64_t>* word = nullptr;
    std::uint64_t address = 0; ///< of the cell, as the peer addresses it
    std::uint32_t chunk = 0;
    std::uint32_t index = 0;
};

/// Value of a credit cell whose receive window is gone; never a round number.
inline constexpr std::uint64_t revoked_credit = ~std::uint64_t{0};

/// A receive window's inbox. A slot's `reserved` field holds the mask of the rails above 0 that
/// carry pieces of its round.
struct Inbox {
    copy_channel::ControlBlock block;
    alignas(copy_channel::cache_line) std::atomic<std::uint64_t> rail_round[max_rails];
};

/// Messages between windows.
enum class NoticeKind : std::uint16_t {
    receiver_closed = 1, ///< to a sender: no more credits; `round` != 0: answer with revoke_ack
    /// to a receiver: no more data. Sent on rail 0 and on every rail that ever carried pieces
    /// (`rails`, the mask of those above 0), each behind that rail's puts: the sender counts as
    /// closed once the notices of all of them (`rail`) have come.
    sender_closed = 2,
    /// to a receiver: the sender has not started `round` and never will (on the message path a
    /// round it sent ahead of its credit may still come: the registry drops it with the window)
    revoke_ack = 3,
    /// to a receiver: the pieces of `round` on `rail` have landed, or (rail 0, with data) the
    /// whole small message of `round` is in this message
    arrived = 4,
    sender_connected = 5, ///< to a receiver: the sender has unpacked its keys
    credit = 6,           ///< to a sender: the receiver granted `round` (message path)
};

struct Notice {
    std::uint64_t target = 0; ///< window id at the receiving process
    std::uint64_t from = 0;   ///< window id at the sending process
    std::uint64_t round = 0;
    std::uint64_t bytes = 0; ///< arrived on rail 0: bytes of the round
    NoticeKind kind = NoticeKind::receiver_closed;
    std::uint16_t flags = 0; ///< arrived on the message path: ahead_flag, early_flag
    std::uint16_t rail = 0;  ///< arrived, sender_closed: the rail this notice travelled on
    /// arrived on rail 0, sender_closed: mask of the other rails that carried pieces
    std::uint16_t rails = 0;
    /// A credit carried on this message (CreditCarrier, message path): the send window it is for
    /// at the receiving process (0: none) and the round it grants.
    std::uint64_t credit_target = 0;
    std::uint64_t credit_round = 0;
};

/// One piece of a round on the message path: `notice` (kind arrived, `bytes` the whole round)
/// and where the piece's data, which travels with the message, goes in the receive buffer.
struct Piece {
    Notice notice;
    std::uint64_t offset = 0;
};

/// Rounds a sender on the message path may run ahead of its credit (protocol above). 15 rather
/// than 7 halves the credit messages (one per 8 rounds): over TCP, 8 B and 4 KiB rounds gained
/// 4-9% on loopback and across network namespaces (docs/ucx-tcp-measurements.md). What a receive
/// window keeps aside is bounded by (ahead_rounds + 1) x ahead_bytes = 1 MiB.
inline constexpr std::uint64_t ahead_rounds = 15;
/// Receive windows up to this size take every round ahead of the credit on the message path
/// where the transport delivers their pieces eagerly.
inline constexpr std::size_t ahead_bytes = std::size_t{64} << 10;
/// A receiver that the sender runs ahead of sends the credit of every credit_interval-th round.
inline constexpr std::uint64_t credit_interval = (ahead_rounds + 1) / 2;
/// `Notice::flags` of an `arrived` notice or a piece on the message path: the sender runs every
/// round of this window ahead of its credits (`ahead_flag`, also in the slot's `reserved` field
/// once the round landed: bit 0 is never a rail there), and this round went before its credit
/// (`early_flag`).
inline constexpr std::uint16_t ahead_flag = 1;
inline constexpr std::uint16_t early_flag = 2;
/// `Notice::flags` of every message of a send window on the message path that the provider chose
/// to stream (its `arrived` notices, pieces and sender_closed; RailSender::use_messages): a
/// transport with ordered streams of its own carries all of that window's messages through one,
/// so that none overtakes another (the ucx provider's TCP lanes, providers/ucx/lanes.hpp).
inline constexpr std::uint16_t stream_flag = 4;

/// One side of a connection: credits its receive windows owe their senders on the message path,
/// waiting for the next rail-0 message of a send window of the same connection to carry them
/// (protocol above). Windows on different threads may share it.
class CreditCarrier {
public:
    static constexpr std::size_t capacity = 4;

    /// Leaves the credit of `round` for the peer's send window `target`; false if full.
    bool leave(std::uint64_t target, std::uint64_t round) noexcept {
        std::lock_guard<std::mutex> lock(mutex_);
        for (Entry& e : entries_) {
            if (e.target == 0) {
                e = {target, round};
                count_.fetch_add(1, std::memory_order_relaxed);
                return true;
            }
        }
        return false;
    }

    /// Takes back the credit left for `target`: true if it was still here, not carried.
    bool take_back(std::uint64_t target) noexcept {
        std::lock_guard<std::mutex> lock(mutex_);
        for (Entry& e : entries_) {
            if (e.target == target) {
                e = {};
                count_.fetch_sub(1, std::memory_order_relaxed);
                return true;
            }
        }
        return false;
    }

    /// Credits waiting here.
    std::size_t waiting() const noexcept { return count_.load(std::memory_order_relaxed); }

    /// Puts a credit that waits here, if any, into `notice` (else clears its credit fields).
    void carry(Notice& notice) noexcept {
        notice.credit_target = 0;
        notice.credit_round = 0;
        if (count_.load(std::memory_order_relaxed) == 0) {
            return; // the usual case: one load
        }
        std::lock_guard<std::mutex> lock(mutex_);
        for (Entry& e : entries_) {
            if (e.target != 0) {
                notice.credit_target = e.target;
                notice.credit_round = e.round;
                e = {};
                count_.fetch_sub(1, std::memory_order_relaxed);
                return;
            }
        }
    }

private:
    struct Entry {
        std::uint64_t target = 0; ///< 0: free
        std::uint64_t round = 0;
    };
    std::atomic<std::size_t> count_{0};
    std::mutex mutex_;
    Entry entries_[capacity];
};

/// Bits of a send window's state word that the notice handler shares with the data path.
inline constexpr std::uint32_t writing_bit = 1; ///< the sender is putting into receiver memory
inline constexpr std::uint32_t revoked_bit = 2; ///< the receiver window is gone

} // namespace pmr::detail::rails
