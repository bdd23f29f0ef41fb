// SPDX-License-Identifier: MIT
#include "rails/registry.hpp"

#include <cstring>
#include <new>
#include <thread>

namespace pmr::detail::rails {

void Registry::add_sender(std::uint64_t id, std::atomic<std::uint32_t>* state,
                          const CreditCell& cell) {
    std::lock_guard<std::mutex> lock(mutex_);
    Link& link = links_[id];
    link.role = Link::Role::sender;
    link.sender_state = state;
    link.cell = cell;
}

void Registry::add_receiver(std::uint64_t id, Inbox* inbox, std::atomic<bool>* acked,
                            std::atomic<bool>* connected, std::byte* buffer, std::size_t capacity) {
    std::lock_guard<std::mutex> lock(mutex_);
    Link& link = links_[id];
    link.role = Link::Role::receiver;
    link.inbox = inbox;
    link.acked = acked;
    link.connected = connected;
    link.buffer = buffer;
    link.capacity = capacity;
}

Registry::Link* Registry::receiver_locked(std::uint64_t id) noexcept {
    auto it = links_.find(id);
    return it != links_.end() && it->second.role == Link::Role::receiver ? &it->second : nullptr;
}

void Registry::credit_locked(std::uint64_t sender, std::uint64_t round) noexcept {
    auto it = links_.find(sender);
    if (it == links_.end() || it->second.role != Link::Role::sender ||
        it->second.cell.word == nullptr) {
        return; // gone (a credit carried on a message may come after the receiver closed)
    }
    // Credits only grow; a revoked cell stays revoked.
    std::atomic<std::uint64_t>& word = *it->second.cell.word;
    std::uint64_t current = word.load(std::memory_order_acquire);
    while (current < round &&
           !word.compare_exchange_weak(current, round, std::memory_order_acq_rel)) {
    }
}

void Registry::carried_credit_locked(const Notice& notice) noexcept {
    if (notice.credit_target != 0) {
        credit_locked(notice.credit_target, notice.credit_round);
    }
}

std::byte* Registry::destination(const Piece& piece, std::size_t bytes) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    carried_credit_locked(piece.notice);
    Link* link = receiver_locked(piece.notice.target);
    if (link == nullptr || link->buffer == nullptr || piece.offset > link->capacity ||
        bytes > link->capacity - piece.offset) {
        return nullptr;
    }
    ++link->receiving;
    return link->buffer + piece.offset;
}

void Registry::landed(const Piece& piece, const void* data, std::size_t bytes) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    carried_credit_locked(piece.notice);
    Link* link = receiver_locked(piece.notice.target);
    if (link == nullptr) {
        return;
    }
    if ((piece.notice.flags & early_flag) != 0 && piece.notice.round > link->granted &&
        (data != nullptr || bytes == 0)) {
        // Ahead of its round: the receiver may still read the buffer.
        (void)keep_early_locked(*link, piece, data, bytes);
        return;
    }
    landed_locked(*link, piece, data, bytes);
}

bool Registry::keep_early_locked(Link& link, const Piece& piece, const void* data,
                                 std::size_t bytes) noexcept {
    const Notice& notice = piece.notice;
    if (notice.bytes > link.capacity || notice.bytes > ahead_bytes ||
        notice.round > link.granted + ahead_rounds || piece.offset > notice.bytes ||
        bytes > notice.bytes - piece.offset) {
        return false; // not a round the protocol lets run ahead: dropped, it never completes
    }
    try {
        if (link.early.empty()) {
            link.early.resize(ahead_rounds + 1);
        }
        Early& early = link.early[notice.round % (ahead_rounds + 1)];
        if (early.round != notice.round) {
            early.round = 0; // claims the round only once its buffer has the size
            early.data.resize(notice.bytes);
            early.round = notice.round;
            early.bytes = 0;
            early.notice = notice;
        }
        if (bytes > 0) {
            std::memcpy(early.data.data() + piece.offset, data, bytes);
        }
        early.bytes += bytes;
        return true;
    } catch (const std::bad_alloc&) {
        return false; // the round never completes: the receiver's wait ends in Timeout
    }
}

void Registry::grant(std::uint64_t id, std::uint64_t round) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    Link* link = receiver_locked(id);
    if (link == nullptr) {
        return;
    }
    link->granted = round;
    if (link->early.empty()) {
        return;
    }
    Early& early = link->early[round % (ahead_rounds + 1)];
    if (early.round != round) {
        return;
    }
    // Whatever has not come yet lands in the buffer after this copy, which it overwrites.
    Piece whole;
    whole.notice = early.notice;
    whole.offset = 0;
    if (!early.data.empty()) {
        if (link->buffer == nullptr) {
            return; // detached: the window is closing
        }
        std::memcpy(link->buffer, early.data.data(), early.data.size());
    }
    early.round = 0;
    landed_locked(*link, whole, nullptr, early.bytes);
}

void Registry::received(const Piece& piece, std::size_t bytes, bool ok) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    Link* link = receiver_locked(piece.notice.target);
    if (link == nullptr) {
        return;
    }
    if (link->receiving > 0) {
        --link->receiving;
    }
    if (ok) {
        landed_locked(*link, piece, nullptr, bytes);
    }
    if (link->receiving == 0 && link->close_pending) {
        link->close_pending = false;
        link->inbox->block.sender_closed.store(1, std::memory_order_release);
    }
}

std::byte* Registry::begin_copy(const Piece& piece, std::size_t offset) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    Link* link = receiver_locked(piece.notice.target);
    if (link == nullptr || link->buffer == nullptr || piece.offset > link->capacity ||
        offset > link->capacity - piece.offset) {
        return nullptr;
    }
    ++link->copying;
    return link->buffer + piece.offset + offset;
}

void Registry::end_copy(const Piece& piece) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    Link* link = receiver_locked(piece.notice.target);
    if (link != nullptr && link->copying > 0) {
        --link->copying;
    }
}

void Registry::detach(std::uint64_t id) noexcept {
    for (;;) {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            Link* link = receiver_locked(id);
            if (link == nullptr) {
                return;
            }
            link->buffer = nullptr;
            if (link->copying == 0) {
                return;
            }
        }
        // A copy that began before is one non-blocking socket read: it ends soon.
        std::this_thread::yield();
    }
}

std::size_t Registry::receiving(std::uint64_t id) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    const Link* link = receiver_locked(id);
    return link != nullptr ? link->receiving : 0;
}

void Registry::landed_locked(Link& link, const Piece& piece, const void* data,
                             std::size_t bytes) noexcept {
    const Notice& notice = piece.notice;
    if (notice.bytes > link.capacity || piece.offset > notice.bytes ||
        bytes > notice.bytes - piece.offset) {
        return; // the piece is malformed: the round never completes
    }
    if (link.buffer == nullptr && notice.bytes > 0) {
        return; // detached: the window is closing
    }
    if (data != nullptr && bytes > 0) {
        std::memcpy(link.buffer + piece.offset, data, bytes);
    }
    if (link.landed_round != notice.round) {
        link.landed_round = notice.round;
        link.landed_bytes = 0;
    }
    link.landed_bytes += bytes;
    // Rounds do not overlap in the buffer (pieces ahead of their round wait in `early` until the
    // receiver has begun it, after its wait on the previous one), so counting bytes suffices;
    // the pieces of a round carry disjoint ranges.
    if (link.landed_bytes == notice.bytes) {
        copy_channel::slot_of(link.inbox->block, notice.round).reserved = notice.flags & ahead_flag;
        copy_channel::publish(link.inbox->block, notice.round, notice.bytes,
                              copy_channel::Delivery::direct);
    }
}

void Registry::remove(std::uint64_t id) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    links_.erase(id);
}

bool Registry::keep_for_sender(std::uint64_t id,
                               std::vector<std::shared_ptr<void>> memory) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    try {
        awaiting_sender_[id] = std::move(memory);
        return true;
    } catch (const std::bad_alloc&) {
        return false;
    }
}

void Registry::peer_withdrew(std::uint64_t id) noexcept {
    std::vector<std::shared_ptr<void>> memory;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        auto link = links_.find(id);
        if (link != links_.end() && link->second.role == Link::Role::retired) {
            release_cell_locked(link->second.cell);
            links_.erase(link);
        }
        auto it = awaiting_sender_.find(id);
        if (it == awaiting_sender_.end()) {
            return;
        }
        memory = std::move(it->second);
        awaiting_sender_.erase(it);
    }
    // In the order given (registrations before the memory they cover), outside the lock.
    for (auto& m : memory) {
        m.reset();
    }
}

void Registry::retire(std::uint64_t id, const CreditCell& cell) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = links_.find(id);
    if (it == links_.end()) {
        return;
    }
    it->second.role = Link::Role::retired;
    it->second.sender_state = nullptr;
    it->second.cell = cell;
}

std::optional<Notice> Registry::handle(const Notice& notice, const void* data,
                                       std::size_t bytes) noexcept {
    bool acknowledge = false;
    std::lock_guard<std::mutex> lock(mutex_);
    carried_credit_locked(notice);
    auto it = links_.find(notice.target);
    Link* link = it != links_.end() ? &it->second : nullptr;
    switch (notice.kind) {
    case NoticeKind::receiver_closed:
        acknowledge = notice.round != 0;
        if (link != nullptr && link->role == Link::Role::sender) {
            const std::uint32_t before =
                link->sender_state->fetch_or(revoked_bit, std::memory_order_acq_rel);
            // A sender in the middle of its puts finishes the round: the receiver waits for the
            // sequence word instead of an acknowledgement.
            acknowledge = acknowledge && (before & writing_bit) == 0;
        } else if (link != nullptr && link->role == Link::Role::retired) {
            release_cell_locked(link->cell);
            links_.erase(it);
        }
        break;
    case NoticeKind::sender_closed:
        if (link != nullptr && link->role == Link::Role::receiver && notice.rail < max_rails) {
            // A sender that closed had connected (its sender_connected notice may take another
            // way, e.g. UCX where this one took a TCP lane, and come later).
            link->connected->store(true, std::memory_order_release);
            // Closed once every rail that carried pieces has said so behind its last puts.
            link->closed_rails |= 1U << notice.rail;
            const std::uint32_t all = notice.rails | 1U;
            if ((link->closed_rails & all) == all) {
                if (link->receiving > 0) {
                    // A rendezvous sent before the close still delivers its data: closed once
                    // it has landed (received()).
                    link->close_pending = true;
                } else {
                    link->inbox->block.sender_closed.store(1, std::memory_order_release);
                }
            }
        }
        break;
    case NoticeKind::arrived:
        if (link != nullptr && link->role == Link::Role::receiver) {
            // The pieces came before this message on the same lane: publish them.
            if (notice.rail == 0 && (notice.flags & early_flag) != 0 &&
                notice.round > link->granted) {
                // A whole round ahead of the receiver (protocol.hpp): kept until it begins it.
                Piece piece;
                piece.notice = notice;
                (void)keep_early_locked(*link, piece, data, bytes);
            } else if (notice.rail == 0 && bytes == notice.bytes &&
                       bytes <= copy_channel::inline_capacity) {
                // A whole round in the notice (empty ones only on the message path: the put
                // path puts its empty rounds into the slot).
                copy_channel::slot_of(link->inbox->block, notice.round).reserved =
                    notice.flags & ahead_flag;
                copy_channel::publish_inline(link->inbox->block, notice.round,
                                             static_cast<const std::byte*>(data), bytes);
            } else if (notice.rail == 0) {
                copy_channel::Slot& slot = copy_channel::slot_of(link->inbox->block, notice.round);
                slot.reserved = notice.rails;
                copy_channel::publish(link->inbox->block, notice.round, notice.bytes,
                                      copy_channel::Delivery::direct);
            } else if (notice.rail < max_rails) {
                link->inbox->rail_round[notice.rail].store(notice.round, std::memory_order_release);
            }
        }
        break;
    case NoticeKind::revoke_ack:
        if (link != nullptr && link->role == Link::Role::receiver) {
            link->acked->store(true, std::memory_order_release);
        }
        break;
    case NoticeKind::credit:
        credit_locked(notice.target, notice.round);
        break;
    case NoticeKind::sender_connected:
        if (link != nullptr && link->role == Link::Role::receiver) {
            link->connected->store(true, std::memory_order_release);
        }
        break;
    }
    if (!acknowledge) {
        return std::nullopt;
    }
    Notice ack;
    ack.target = notice.from;
    ack.from = notice.target;
    ack.round = notice.round;
    ack.kind = NoticeKind::revoke_ack;
    return ack;
}

std::optional<CreditCell> Registry::take_cell() noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    if (free_cells_.empty()) {
        return std::nullopt;
    }
    CreditCell cell = free_cells_.back();
    free_cells_.pop_back();
    cell.word->store(0, std::memory_order_relaxed);
    return cell;
}

void Registry::add_chunk(std::byte* memory, std::uint64_t address, std::size_t count,
                         std::uint32_t chunk) {
    std::lock_guard<std::mutex> lock(mutex_);
    free_cells_.reserve(free_cells_.size() + count);
    for (std::size_t i = count; i-- > 0;) {
        std::byte* line = memory + i * copy_channel::cache_line;
        CreditCell cell;
        cell.word = new (line) std::atomic<std::uint64_t>(0);
        cell.address = address + i * copy_channel::cache_line;
        cell.chunk = chunk;
        cell.index = static_cast<std::uint32_t>(i);
        free_cells_.push_back(cell);
    }
}

void Registry::release_cell(const CreditCell& cell) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    release_cell_locked(cell);
}

void Registry::release_cell_locked(const CreditCell& cell) noexcept {
    try {
        free_cells_.push_back(cell);
    } catch (...) { // NOLINT(bugprone-empty-catch): out of memory: the cell stays unused
    }
}

} // namespace pmr::detail::rails
