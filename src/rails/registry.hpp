// SPDX-License-Identifier: MIT
// The windows of one process that notices can reach, by window id, and the credit cells of its
// send windows. One registry per provider process state; the provider feeds it the notices that
// arrive (handle()) and the memory for new cells (add_chunk()).
#pragma once

#include "rails/protocol.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

namespace pmr::detail::rails {

class Registry {
public:
    std::uint64_t next_window_id() noexcept { return next_id_.fetch_add(1) + 1; }

    // Windows ------------------------------------------------------------------------------------
    /// `cell` receives the credits that come as notices (message path).
    void add_sender(std::uint64_t id, std::atomic<std::uint32_t>* state,
                    const CreditCell& cell = {});
    /// `acked` and `connected` are set by revoke_ack and sender_connected notices; pieces of the
    /// message path land in [buffer, buffer + capacity).
    void add_receiver(std::uint64_t id, Inbox* inbox, std::atomic<bool>* acked,
                      std::atomic<bool>* connected, std::byte* buffer = nullptr,
                      std::size_t capacity = 0);
    void remove(std::uint64_t id) noexcept;
    /// The send window `id` is gone but its receiver may still put credits into `cell`: keep the
    /// cell until the receiver says it closed.
    void retire(std::uint64_t id, const CreditCell& cell) noexcept;

    /// Applies a notice that arrived with `bytes` of `data` (and the credit it carries, if any:
    /// so do destination() and landed()). Returns the answer to send back on
    /// the link it came on, if any (a revoke_ack; the caller sends it, after a fence, so that it
    /// does not overtake the puts of earlier rounds). Never throws: it runs inside the provider's
    /// progress.
    std::optional<Notice> handle(const Notice& notice, const void* data,
                                 std::size_t bytes) noexcept;

    // Windows closed before their peer connected ----------------------------
    /// Keeps `memory` (released in order) of receive window `id`, which a sender that has not
    /// connected yet may still map, until peer_withdrew(id). Returns false if it cannot be kept
    /// here (out of memory): the caller then keeps it until exit.
    bool keep_for_sender(std::uint64_t id, std::vector<std::shared_ptr<void>> memory) noexcept;
    /// The peer's window matching window `id` is gone without having read its keys (learnt from
    /// the set-up messages): the memory kept for a receive window goes, and so does the credit
    /// cell a retired send window kept for its receiver.
    void peer_withdrew(std::uint64_t id) noexcept;

    /// Message path: where the `bytes` of `piece` go in its receive window's buffer, or null if
    /// the window is gone or the piece does not fit (then the transport drops the data). A
    /// non-null answer counts as a receive in progress until received() of the same piece.
    std::byte* destination(const Piece& piece, std::size_t bytes) noexcept;
    /// Message path: `bytes` of `piece` have landed in the buffer (copied there from `data` here
    /// unless it is null); publishes the round once all of its bytes are there. A piece that came
    /// ahead of its round (early_flag, after the round granted) is kept aside until grant().
    void landed(const Piece& piece, const void* data, std::size_t bytes) noexcept;
    /// Message path: the transport's receive into destination() ended, with its `bytes` in the
    /// buffer if `ok` (then as landed() without data).
    void received(const Piece& piece, std::size_t bytes, bool ok) noexcept;
    /// Message path: receives into the buffer of window `id` still in progress (the window must
    /// not free its buffer while there are any).
    std::size_t receiving(std::uint64_t id) noexcept;
    /// Message path, a transport that receives a piece in several steps (the ucx provider's TCP
    /// lanes): where the next bytes of `piece` go, at `offset` from the piece's start, or null if
    /// the window is gone or has been detached (then the transport drops the rest and reports
    /// received(..., false)). A non-null answer must be followed by end_copy() once the bytes are
    /// written; detach() waits for that.
    std::byte* begin_copy(const Piece& piece, std::size_t offset) noexcept;
    void end_copy(const Piece& piece) noexcept;
    /// Receive window `id` is closing: from now on nothing is written into its buffer (pieces
    /// that arrive are dropped). Returns once no begin_copy() of it is in progress.
    void detach(std::uint64_t id) noexcept;
    /// Message path: receive window `id` has begun `round` (init()): its pieces may land in the
    /// buffer from now on, and those that came ahead of it are copied there now. Pieces of later
    /// rounds wait here (protocol.hpp: rounds ahead of the credit).
    void grant(std::uint64_t id, std::uint64_t round) noexcept;

    // Credit cells -------------------------------------------------------------------------------
    /// A free cell, zeroed, or nothing (then the provider adds a chunk).
    std::optional<CreditCell> take_cell() noexcept;
    /// Carves `count` cells out of registered memory at `memory` (cache-line aligned), whose
    /// address as peers see it is `address`; `chunk` numbers the chunk for the provider's key.
    void add_chunk(std::byte* memory, std::uint64_t address, std::size_t count,
                   std::uint32_t chunk);
    /// Returns a cell no receiver can write to any more.
    void release_cell(const CreditCell& cell) noexcept;

private:
    /// The pieces of a round that came ahead of it: its bytes so far, at their offsets.
    struct Early {
        std::uint64_t round = 0; ///< 0: unused
        std::uint64_t bytes = 0; ///< landed so far
        Notice notice;           ///< of the round's first piece
        std::vector<std::byte> data;
    };

    struct Link {
        enum class Role : std::uint8_t { sender, receiver, retired } role = Role::sender;
        std::atomic<std::uint32_t>* sender_state = nullptr;
        Inbox* inbox = nullptr;
        std::atomic<bool>* acked = nullptr;
        std::atomic<bool>* connected = nullptr;
        std::uint32_t closed_rails = 0; ///< receiver: rails whose sender_closed notice came
        std::byte* buffer = nullptr;    ///< receiver: where pieces land (message path)
        std::size_t capacity = 0;
        std::uint64_t landed_round = 0; ///< receiver: the round whose pieces are landing
        std::uint64_t landed_bytes = 0; ///< and how many of its bytes have landed
        std::size_t receiving = 0;      ///< receiver: receives into `buffer` in progress
        std::size_t copying = 0;        ///< receiver: begin_copy() without end_copy()
        bool close_pending = false;     ///< receiver: the sender closed, `receiving` > 0
        std::uint64_t granted = 0;      ///< receiver: the round it has begun (grant())
        /// receiver: messages of rounds after `granted` (eager, up to ahead_bytes each round),
        /// by round % (ahead_rounds + 1)
        std::vector<Early> early;
        CreditCell cell;
    };

    void release_cell_locked(const CreditCell& cell) noexcept;
    /// The peer's receiver granted `round` to send window `sender`, if it is still here.
    void credit_locked(std::uint64_t sender, std::uint64_t round) noexcept;
    /// Applies the credit a message carries (Notice::credit_target), if any.
    void carried_credit_locked(const Notice& notice) noexcept;
    Link* receiver_locked(std::uint64_t id) noexcept;
    void landed_locked(Link& link, const Piece& piece, const void* data,
                       std::size_t bytes) noexcept;
    bool keep_early_locked(Link& link, const Piece& piece, const void* data,
                           std::size_t bytes) noexcept;

    std::atomic<std::uint64_t> next_id_{0};
    std::mutex mutex_; // links_, free_cells_
    std::map<std::uint64_t, Link> links_;
    std::vector<CreditCell> free_cells_;
    std::map<std::uint64_t, std::vector<std::shared_ptr<void>>> awaiting_sender_;
};

} // namespace pmr::detail::rails
