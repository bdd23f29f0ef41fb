// SPDX-License-Identifier: MIT
// The receiving side of the put path (put_path.hpp): the inbox, credits granted to the sender,
// completion of multi-rail rounds and teardown of a receive window, over a rail transport
// (contract.hpp).
#pragma once

#include "rails/contract.hpp"

namespace pmr::detail::rails {

template <class T>
class RailReceiver {
    static_assert(transport_conforms<T>());

public:
    using Connection = typename T::Connection;

    /// Allocates the inbox (with `extra` bytes behind it for the provider, e.g. a staging area)
    /// and registers the buffer on every rail of the process.
    RailReceiver(std::shared_ptr<typename T::Process> process, const std::string* where,
                 std::byte* buffer, std::size_t bytes, std::size_t extra)
        : process_(std::move(process)), where_(where), buffer_(buffer), bytes_(bytes) {
        typename T::Process& p = *process_;
        id_ = p.registry().next_window_id();
        if (bytes_ > 0) {
            allocation_ = T::owned(p, buffer_, bytes_);
        }
        const std::size_t inbox_bytes = (sizeof(Inbox) + copy_channel::cache_line - 1) /
                                        copy_channel::cache_line * copy_channel::cache_line;
        inbox_memory_ = T::allocate(p, inbox_bytes + extra, sizeof(Inbox), at());
        inbox_ = new (inbox_memory_->data()) Inbox();
        if (extra > 0) {
            extra_area_ = inbox_memory_->data() + inbox_bytes;
        }
        for (std::size_t rail = 0; rail < T::rails(p); ++rail) {
            if (rail == 0) {
                inbox_keys_.push_back(T::pack(*inbox_memory_, at()));
            } else {
                auto registration = T::map(p, rail, inbox_, sizeof(Inbox), at());
                inbox_keys_.push_back(T::pack(*registration, at()));
                registrations_.push_back(std::move(registration));
            }
            if (bytes_ == 0) {
                buffer_keys_.emplace_back();
            } else if (rail == 0 && allocation_) {
                buffer_keys_.push_back(T::pack(*allocation_, at()));
            } else {
                auto registration = T::map(p, rail, buffer_, bytes_, at());
                buffer_keys_.push_back(T::pack(*registration, at()));
                registrations_.push_back(std::move(registration));
            }
        }
        p.registry().add_receiver(id_, inbox_, &acked_, &sender_connected_, buffer_, bytes_);
    }
    RailReceiver(const RailReceiver&) = delete;
    RailReceiver& operator=(const RailReceiver&) = delete;

    /// Ends the window. Returns false if the sender may still write into this object's memory,
    /// which must then be kept (leaked) rather than freed.
    bool close() noexcept {
        bool answered = true;
        if (connection_ != nullptr) {
            if (credit_left_ != 0) {
                (void)take_back_credit(); // moot now
            }
            revoke_mapped();
            if (mapped_cell_ != nullptr) {
                mapped_cell_->store(revoked_credit, std::memory_order_release);
            }
            try {
                if (!sender_closed()) {
                    answered = revoke_put(round_ > 0 && !arrived());
                } else {
                    release_sender_cell();
                }
                finish_credit();
            } catch (const std::exception&) {
                answered = !credit_request_.pending();
            }
            connection_->progress(); // a sender_connected notice may be on its way
            // Nothing more lands in the buffer: pieces that come now are dropped, and a transport
            // that receives in steps stops at its next one (Registry::begin_copy).
            process_->registry().detach(id_);
            // The transport may be receiving into the buffer (a rendezvous of the message path,
            // whose data the sender still has to deliver): the buffer must outlive it.
            Backoff backoff;
            while (process_->registry().receiving(id_) != 0) {
                connection_->progress();
                if (backoff.pause() && (backoff.elapsed_seconds() > teardown_grace_seconds() ||
                                        !connection_->peer_alive())) {
                    answered = process_->registry().receiving(id_) == 0;
                    break;
                }
            }
        }
        process_->registry().remove(id_);
        // A sender that has not unpacked the keys yet may still do so, and some transports crash
        // on keys of freed memory (UCX's shared memory): keep the memory until the sender's side
        // withdraws its window unused (Registry::peer_withdrew(id()), through set-up messages), or
        // until exit. A sender that may still write: until exit (a user buffer cannot be kept).
        if (answered && !sender_connected_.load(std::memory_order_acquire) && keep_for_sender()) {
            debug_log("keeping the registered memory of a receive window until its sender "
                      "withdraws [" +
                      at() + "]");
        } else if (!answered || !sender_connected_.load(std::memory_order_acquire)) {
            debug_log(std::string("keeping the registered memory of a receive window until exit: "
                                  "its sender ") +
                      (answered ? "has not connected" : "may still write into it") + " [" + at() +
                      "]");
            process_->bury(inbox_memory_);
            for (auto& registration : registrations_) {
                process_->bury(registration);
            }
            process_->bury(allocation_);
        }
        return answered;
    }

    /// The key under which close() keeps memory for a sender that has not connected.
    std::uint64_t id() const noexcept { return id_; }
    /// Whether the sender maps this side's memory (its cell mapped here, see connect()).
    bool sender_maps() const noexcept { return connection_ != nullptr && !sender_puts_; }

    Blob describe(const Blob& provider_part) const {
        RecvDescription d{};
        d.id = id_;
        d.inbox = reinterpret_cast<std::uintptr_t>(inbox_);
        d.extra = reinterpret_cast<std::uintptr_t>(extra_area_);
        d.buffer = reinterpret_cast<std::uintptr_t>(buffer_);
        d.bytes = bytes_;
        BlobWriter description;
        description.put(d).put(static_cast<std::uint32_t>(inbox_keys_.size()));
        for (std::size_t rail = 0; rail < inbox_keys_.size(); ++rail) {
            T::put_key(description, inbox_keys_[rail]);
            T::put_key(description, buffer_keys_[rail]);
        }
        description.put_bytes(provider_part);
        return description.take();
    }

    /// `map_cell`: store credits straight into the sender's cell where it can be mapped here.
    void connect(Connection& connection, const Blob& peer, bool map_cell) {
        BlobReader reader(peer, at());
        const Blob cell_key = T::get_key(reader, "credit cell", at());
        const auto d = reader.template get<SendDescription>();
        reader.finish();
        // Some transports cannot unpack the keys of a dead process's memory (UCX crashes).
        if (!connection.peer_alive()) {
            raise<PeerLost>("the peer process exited before its send window was used", at());
        }
        connection_ = &connection;
        sender_id_ = d.id;
        cell_address_ = d.cell;
        cell_key_ = T::unpack(connection, 0, cell_key, "credit cell", at());
        if (map_cell) {
            mapped_cell_ = reinterpret_cast<std::atomic<std::uint64_t>*>(cell_key_.pointer(d.cell));
        }
        // The sender chooses its path; where this side maps the sender's memory, the sender maps
        // this side's (same transports on both sides) and takes the load/store path.
        sender_puts_ = mapped_cell_ == nullptr;
    }

    /// Credits as `credit` notices instead of puts (where puts are emulated by messages).
    void use_credit_notices() noexcept { credit_notices_ = true; }

    void init() {
        ++round_;
        // The credit goes where either path of the sender looks: the inbox (load/store) and the
        // sender's cell (put path).
        copy_channel::grant(inbox_->block, round_);
        if constexpr (has_piece_messages<T>::value) {
            if (credit_notices_ && mapped_cell_ == nullptr) {
                // Messages of this round that came ahead of it wait in the registry until now,
                // also where the sender has finished its last round and closed since.
                process_->registry().grant(id_, round_);
            }
        }
        if (sender_closed()) {
            return; // nobody to grant; wait() reports PeerLost
        }
        if (mapped_cell_ != nullptr) {
            mapped_cell_->store(round_, std::memory_order_release);
            return;
        }
        if (credit_notices_) {
            // A credit left two rounds ago that no message has carried goes now (protocol.hpp).
            const bool owed = credit_left_ != 0 && round_ >= credit_left_ + 2 && take_back_credit();
            if (!sender_ahead_ || owed) {
                send_credit_notice();
                return;
            }
            // The sender runs ahead of its credits: some rounds suffice. Such a credit rides on
            // this side's next message to the peer, or, where none can carry it, waits for this
            // side's next test() (protocol.hpp), so that a thread that posts its own data after
            // this init() puts that on the wire first.
            if (round_ % credit_interval == 0) {
                credit_deferred_ = !leave_credit();
            }
            return;
        }
        finish_credit(); // the network may still read the previous credit from `credit_`
        credit_ = round_;
        credit_request_ =
            T::put(*connection_, 0, cell_key_, &credit_, sizeof credit_, cell_address_, at());
    }

    bool test() {
        if (credit_deferred_) {
            credit_deferred_ = false;
            if (!sender_closed()) {
                try {
                    send_credit_notice();
                } catch (const PeerLost&) {
                    // The credit is moot once the peer is gone; a round that came is still
                    // delivered.
                    if (!arrived()) {
                        throw;
                    }
                    return true;
                }
            }
        }
        if (arrived()) {
            return true;
        }
        if (!sender_puts_ && !credit_request_.pending()) {
            return false;
        }
        connection_->progress();
        (void)credit_request_.done("put (credit)", at()); // throws if the put failed
        return arrived();
    }

    std::size_t received_bytes() const noexcept { return received_; }

    bool sender_closed() const noexcept {
        return inbox_->block.sender_closed.load(std::memory_order_acquire) != 0;
    }

    Inbox* inbox() const noexcept { return inbox_; }
    std::byte* extra_area() const noexcept { return extra_area_; }
    const std::shared_ptr<typename T::Memory>& allocation() const noexcept { return allocation_; }

private:
    // Hands the registered memory to the registry until the sender withdraws; false if it could
    // not (then it is kept until exit).
    bool keep_for_sender() noexcept {
        try {
            std::vector<std::shared_ptr<void>> memory;
            memory.reserve(registrations_.size() + 2);
            memory.emplace_back(inbox_memory_);
            memory.insert(memory.end(), registrations_.begin(), registrations_.end());
            memory.emplace_back(allocation_);
            return process_->registry().keep_for_sender(id_, std::move(memory));
        } catch (const std::bad_alloc&) {
            return false;
        }
    }

    const std::string& at() const noexcept { return *where_; }

    // copy_channel::receive(), plus the pieces of a multi-rail round.
    bool arrived() noexcept {
        copy_channel::Slot& slot = copy_channel::slot_of(inbox_->block, round_);
        if (slot.sequence.load(std::memory_order_acquire) != round_) {
            return false;
        }
        for (std::uint32_t others = slot.reserved, rail = 1; others >> rail != 0; ++rail) {
            if (((others >> rail) & 1U) != 0 &&
                inbox_->rail_round[rail].load(std::memory_order_acquire) != round_) {
                return false;
            }
        }
        sender_connected_.store(true, std::memory_order_relaxed); // it wrote: it has the keys
        sender_ahead_ = (slot.reserved & ahead_flag) != 0;
        received_ = static_cast<std::size_t>(slot.bytes);
        if (received_ > 0 && slot.delivery == copy_channel::Delivery::inlined) {
            std::memcpy(buffer_, slot.data, received_);
        } else if (received_ > 0 && slot.delivery == copy_channel::Delivery::staged) {
            std::memcpy(buffer_, extra_area_, received_);
        }
        return true;
    }

    // Leaves the credit of this round to be carried by a message of this connection.
    bool leave_credit() noexcept {
        if constexpr (has_credit_carrier<T>::value) {
            if (connection_->credits().leave(sender_id_, round_)) {
                credit_left_ = round_;
                return true;
            }
        }
        return false;
    }

    // True if the credit left was still waiting (then it is this side's to send).
    bool take_back_credit() noexcept {
        credit_left_ = 0;
        if constexpr (has_credit_carrier<T>::value) {
            return connection_->credits().take_back(sender_id_);
        }
        return false;
    }

    void send_credit_notice() {
        finish_credit(); // the network may still read the previous notice
        credit_notice_.target = sender_id_;
        credit_notice_.from = id_;
        credit_notice_.round = round_;
        credit_notice_.kind = NoticeKind::credit;
        credit_request_ = T::signal(*connection_, 0, credit_notice_, nullptr, 0, at());
    }

    void finish_credit() {
        if (credit_request_.done("put (credit)", at())) {
            return; // the usual case: no clock read, no wait counted by the spin policy
        }
        Backoff backoff;
        while (!credit_request_.done("put (credit)", at())) {
            connection_->progress();
            if (backoff.pause() && !connection_->peer_alive()) {
                raise<PeerLost>("the peer process exited", at());
            }
        }
    }

    // The load/store path: withdraw the credit in the inbox; a sender that claimed it is copying
    // into the user buffer by cross-memory attach right now, which must end before it is freed.
    void revoke_mapped() noexcept {
        Backoff backoff;
        while (copy_channel::revoke(inbox_->block) != 0) {
            if (backoff.pause() && (backoff.elapsed_seconds() > teardown_grace_seconds() ||
                                    !connection_->peer_alive())) {
                break;
            }
        }
    }

    // A sender that closed first kept its credit cell for credits of this side that might still
    // be on their way (Registry::retire); this notice, behind them, lets it reuse the cell.
    void release_sender_cell() {
        T::fence(*connection_, 0, at());
        Notice notice;
        notice.target = sender_id_;
        notice.from = id_;
        notice.kind = NoticeKind::receiver_closed;
        T::notify(*connection_, 0, notice, false, at());
    }

    // The put path: tell the sender; while a credit is out it may be putting into this memory,
    // so wait (bounded) until it acknowledges or finishes the round. False if it never answered.
    bool revoke_put(bool outstanding) {
        // Credits put earlier must land before the notice, which may recycle the cell.
        T::fence(*connection_, 0, at());
        Notice notice;
        notice.target = sender_id_;
        notice.from = id_;
        notice.round = outstanding ? round_ : 0;
        notice.kind = NoticeKind::receiver_closed;
        T::notify(*connection_, 0, notice, outstanding, at());
        if (!outstanding || !sender_puts_) {
            return true;
        }
        Backoff backoff;
        while (!arrived() && !acked_.load(std::memory_order_acquire) && !sender_closed()) {
            connection_->progress();
            if (backoff.pause()) {
                if (!connection_->peer_alive()) {
                    return true;
                }
                if (backoff.elapsed_seconds() > teardown_grace_seconds()) {
                    return false;
                }
            }
        }
        return true;
    }

    std::shared_ptr<typename T::Process> process_;
    const std::string* where_;
    std::uint64_t id_ = 0;
    std::shared_ptr<typename T::Memory> inbox_memory_;               ///< rail 0
    std::vector<std::shared_ptr<typename T::Memory>> registrations_; ///< inbox rails 1.., buffer
    Inbox* inbox_ = nullptr;
    std::byte* extra_area_ = nullptr;
    std::byte* buffer_ = nullptr;
    std::size_t bytes_ = 0;
    std::shared_ptr<typename T::Memory> allocation_; ///< library-owned memory of the provider
    std::vector<Blob> inbox_keys_;                   ///< per rail
    std::vector<Blob> buffer_keys_;                  ///< per rail
    std::atomic<bool> acked_{false};
    std::atomic<bool> sender_connected_{false}; ///< the sender has unpacked this window's keys

    Connection* connection_ = nullptr;
    std::uint64_t sender_id_ = 0;
    typename T::RemoteKey cell_key_;
    std::uint64_t cell_address_ = 0;
    std::atomic<std::uint64_t>* mapped_cell_ = nullptr; ///< credits by store when not null
    std::uint64_t credit_ = 0;                          ///< source of the credit put
    bool credit_notices_ = false;                       ///< credits as notices, not puts
    Notice credit_notice_;                              ///< source of the credit notice
    typename T::Request credit_request_;
    bool sender_puts_ = true;   ///< the sender is on the put path (its data lands during progress)
    bool sender_ahead_ = false; ///< its last round said it runs ahead of credits (protocol.hpp)
    bool credit_deferred_ = false;  ///< the credit of round_ goes out in the next test()
    std::uint64_t credit_left_ = 0; ///< the round whose credit was left to be carried, 0: none

    std::uint64_t round_ = 0;
    std::size_t received_ = 0;
};

} // namespace pmr::detail::rails
