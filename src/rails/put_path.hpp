// SPDX-License-Identifier: MIT
// The put path of providers with rails (see protocol.hpp for the protocol): the send and receive
// state machines with credits, slots, sequence words, multi-rail rounds and teardown, written once
// over a small static transport interface that each provider implements for its network.
//
// A transport T supplies (checked by transport_conforms<T>()):
//   using Connection;  // the provider's connection: rails(), progress(), peer_alive()
//   using Process;     // the provider's process state: rails::Registry& registry();
//                      //   CreditCell acquire_cell(where); Blob cell_key(const CreditCell&);
//                      //   void bury(std::shared_ptr<Memory>) (kept until exit)
//   using Memory;      // registered memory: std::byte* data() const
//   using RemoteKey;   // a peer's memory key unpacked on one rail; std::byte* pointer(address)
//                      //   is where that memory is mapped here, or null
//   using Request;     // a pending local operation: pending(), done(call, where) (throws)
//   static std::size_t rails(const Process&);
//   static Request put(Connection&, rail, const RemoteKey&, const void* source, bytes, address,
//                      where);                   // the source stays valid until done
//   static void fence(Connection&, rail, where); // later operations on the rail land after
//                                                // earlier ones
//   static Request signal(Connection&, rail, const Notice&, const void* data, bytes, where);
//                                                // a notice with up to inline_capacity bytes,
//                                                // handled by the peer's registry, after the
//                                                // rail's earlier puts; sources valid until done
//   static void notify(Connection&, rail, const Notice&, bool reply, where); // fire and forget
//   static RemoteKey unpack(Connection&, rail, const Blob& key, const char* what, where);
//   static std::shared_ptr<Memory> allocate(Process&, bytes, zeroed, where);  // rail 0 memory
//   static std::shared_ptr<Memory> map(Process&, rail, void* address, bytes, where);
//   static std::shared_ptr<Memory> owned(Process&, const void* address, bytes); // or null
//   static Blob pack(const Memory&, where);
//   static void put_key(BlobWriter&, const Blob&);  static Blob get_key(BlobReader&, what, where);
// and, for the message path (protocol.hpp; optional, see has_piece_messages):
//   static Request send(Connection&, rail, const Piece&, const void* data, bytes, where);
//                                                // one message with the piece's data, handed to
//                                                // the peer's Registry::destination()/landed();
//                                                // complete once the data left the source and
//                                                // the piece header may be reused
// and, optionally, for the message path (see has_credit_carrier):
//   Connection::credits() -> CreditCarrier&  // this side's carrier of credits (protocol.hpp)
// and, optionally (see has_put_pair):
//   static std::pair<Request, Request> put_pair(Connection&, rail, const RemoteKey&,
//                      const void* first, bytes, address, const void* second, bytes, address,
//                      where);                   // two puts, the second landing after the
//                                                // first, issued at once (a slot and its
//                                                // sequence word: the transport saves the
//                                                // per-put work between them)
#pragma once

#include "base/backoff.hpp"
#include "base/blob.hpp"
#include "base/environment.hpp"
#include "base/error.hpp"
#include "rails/protocol.hpp"
#include "rails/registry.hpp"

#include <pmr/window.hpp>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace pmr::detail::rails {

/// How long a destructor waits for the network or the peer before it gives up: destructors must
/// not hang on a dead or stuck peer, and cannot throw. PMR_TIMEOUT if set and shorter, else 10 s.
inline double teardown_grace_seconds() noexcept {
    try {
        const double timeout = settings().timeout_seconds;
        return timeout > 0 && timeout < 10.0 ? timeout : 10.0;
    } catch (...) { // malformed PMR_TIMEOUT: reported elsewhere
        return 10.0;
    }
}

namespace check {
template <class T, class = void>
struct is_transport : std::false_type {};
template <class T>
struct is_transport<
    T, std::void_t<
           typename T::Connection, typename T::Process, typename T::Memory, typename T::RemoteKey,
           typename T::Request,
           decltype(std::size_t{T::rails(std::declval<const typename T::Process&>())}),
           decltype(typename T::Request{
               T::put(std::declval<typename T::Connection&>(), std::size_t{},
                      std::declval<const typename T::RemoteKey&>(), std::declval<const void*>(),
                      std::size_t{}, std::uint64_t{}, std::declval<const std::string&>())}),
           decltype(T::fence(std::declval<typename T::Connection&>(), std::size_t{},
                             std::declval<const std::string&>())),
           decltype(typename T::Request{T::signal(std::declval<typename T::Connection&>(),
                                                  std::size_t{}, std::declval<const Notice&>(),
                                                  std::declval<const void*>(), std::size_t{},
                                                  std::declval<const std::string&>())}),
           decltype(T::notify(std::declval<typename T::Connection&>(), std::size_t{},
                              std::declval<const Notice&>(), bool{},
                              std::declval<const std::string&>())),
           decltype(typename T::RemoteKey{T::unpack(
               std::declval<typename T::Connection&>(), std::size_t{}, std::declval<const Blob&>(),
               std::declval<const char*>(), std::declval<const std::string&>())}),
           decltype(static_cast<Registry&>(std::declval<typename T::Process&>().registry())),
           decltype(Blob{T::pack(std::declval<const typename T::Memory&>(),
                                 std::declval<const std::string&>())}),
           decltype(bool{std::declval<typename T::Request&>().done(
               std::declval<const char*>(), std::declval<const std::string&>())})>>
    : std::true_type {};
} // namespace check

/// Whether transport T can send pieces as messages (the message path of protocol.hpp).
template <class T, class = void>
struct has_piece_messages : std::false_type {};
template <class T>
struct has_piece_messages<
    T, std::void_t<decltype(typename T::Request{T::send(
           std::declval<typename T::Connection&>(), std::size_t{}, std::declval<const Piece&>(),
           std::declval<const void*>(), std::size_t{}, std::declval<const std::string&>())})>>
    : std::true_type {};

/// Whether the connections of transport T carry credits on data (protocol.hpp, CreditCarrier).
template <class T, class = void>
struct has_credit_carrier : std::false_type {};
template <class T>
struct has_credit_carrier<T, std::void_t<decltype(static_cast<CreditCarrier&>(
                                 std::declval<typename T::Connection&>().credits()))>>
    : std::true_type {};

/// Whether transport T issues a slot and its sequence word together (T::put_pair).
template <class T, class = void>
struct has_put_pair : std::false_type {};
template <class T>
struct has_put_pair<T,
                    std::void_t<decltype(T::put_pair(
                        std::declval<typename T::Connection&>(), std::size_t{},
                        std::declval<const typename T::RemoteKey&>(), std::declval<const void*>(),
                        std::size_t{}, std::uint64_t{}, std::declval<const void*>(), std::size_t{},
                        std::uint64_t{}, std::declval<const std::string&>()))>> : std::true_type {};

template <class T>
constexpr bool transport_conforms() {
    static_assert(check::is_transport<T>::value,
                  "a rail transport needs the types and functions listed in rails/put_path.hpp");
    return true;
}

/// A receive window as its sender reads it: the generic part, then the packed keys of the inbox
/// and of the buffer on every rail, then the provider's own part.
struct RecvDescription {
    std::uint64_t id;
    std::uint64_t inbox;
    std::uint64_t extra; ///< the provider's area behind the inbox (e.g. staging), 0 if none
    std::uint64_t buffer;
    std::uint64_t bytes;
};

/// A send window as its receiver reads it: the packed key of the credit cell, then this.
struct SendDescription {
    std::uint64_t id;
    std::uint64_t cell;
};

// -------------------------------------------------------------------------------------------------
// Sender
// -------------------------------------------------------------------------------------------------

template <class T>
class RailSender {
    static_assert(transport_conforms<T>());

public:
    using Connection = typename T::Connection;

    RailSender(std::shared_ptr<typename T::Process> process, const std::string* where)
        : process_(std::move(process)), where_(where) {
        id_ = process_->registry().next_window_id();
        cell_ = process_->acquire_cell(at());
        cell_key_ = process_->cell_key(cell_);
        try {
            process_->registry().add_sender(id_, &flags_, cell_);
        } catch (...) {
            process_->registry().release_cell(cell_);
            throw;
        }
    }
    RailSender(const RailSender&) = delete;
    RailSender& operator=(const RailSender&) = delete;

    /// Ends the window: finishes a round whose puts were issued, tells the receiver on every rail
    /// that carried pieces, and gives the cell back (or keeps it for a receiver that may still
    /// put credits). Returns false if the network still reads from this object, which must then
    /// be kept (leaked) rather than freed.
    bool close() noexcept {
        unlist();
        if (connection_ != nullptr && !load_store_) {
            // Nothing was written while waiting for a credit; once puts are issued they read the
            // user's buffer and their signal must follow, so that round is finished.
            if (phase_ == Phase::credit) {
                phase_ = Phase::idle;
            }
            Backoff backoff;
            while (broken_ && !requests_.empty()) { // what was issued before a failed send
                connection_->progress();
                auto pending = std::remove_if(requests_.begin(), requests_.end(), [&](auto& r) {
                    try {
                        return r.done("send", at());
                    } catch (const std::exception&) {
                        return true; // done, with an error
                    }
                });
                requests_.erase(pending, requests_.end());
                if (requests_.empty()) {
                    break;
                }
                if (backoff.pause() && (backoff.elapsed_seconds() > teardown_grace_seconds() ||
                                        !connection_->peer_alive())) {
                    debug_log("a send window's operations before a failed send did not "
                              "complete [" +
                              at() + "]");
                    process_->registry().retire(id_, cell_);
                    return false;
                }
            }
            while (phase_ != Phase::idle) {
                try {
                    progress();
                } catch (const std::exception&) {
                    break;
                }
                if (backoff.pause() && (backoff.elapsed_seconds() > teardown_grace_seconds() ||
                                        !connection_->peer_alive())) {
                    break;
                }
            }
            if (phase_ != Phase::idle) {
                debug_log("a send window's last puts did not complete [" + at() + "]");
                end_writing();
                process_->registry().retire(id_, cell_);
                return false;
            }
        }
        // The receiver must not take the sender for closed (and free its memory) while puts of
        // the last round are still on their way. A notice orders only behind the puts of its own
        // rail, so every rail that carried pieces sends one, behind a fence; the receiver waits
        // for all of them. No flush here: over emulated RMA it completes only while the peer
        // progresses those rails, and the peer, done with its windows, may be anywhere.
        if (connection_ != nullptr && !receiver_closed()) {
            try {
                Notice notice;
                notice.target = receiver_id_;
                notice.from = id_;
                notice.kind = NoticeKind::sender_closed;
                notice.flags = stream_flags_;
                notice.rails = static_cast<std::uint16_t>(other_rails_used_);
                for (std::size_t rail = connection_->rails(); rail-- > 0;) {
                    if (rail != 0 && (other_rails_used_ & (1U << rail)) == 0) {
                        continue;
                    }
                    T::fence(*connection_, rail, at());
                    notice.rail = static_cast<std::uint16_t>(rail);
                    T::notify(*connection_, rail, notice, false, at());
                }
            } catch (const std::exception&) { // NOLINT(bugprone-empty-catch)
                // The receiver then learns it from PMR_TIMEOUT or the peer's death.
            }
        }
        if (receiver_closed()) {
            process_->registry().remove(id_);
            process_->registry().release_cell(cell_);
        } else {
            // The receiver may still put a credit into the cell; it is reused once the receiver
            // tells it closed.
            process_->registry().retire(id_, cell_);
        }
        return true;
    }

    Blob describe() const {
        BlobWriter description;
        T::put_key(description, cell_key_);
        description.put(SendDescription{id_, cell_.address});
        return description.take();
    }

    /// Reads the generic part of the receiver's description (which must agree with the window
    /// size the peer announced) and unpacks its keys; the provider's part follows in `reader`.
    /// `signal_by_message`: signal rounds by notices instead of fenced sequence puts (where the
    /// transport emulates puts, or orders them weakly).
    RecvDescription connect(Connection& connection, BlobReader& reader, bool signal_by_message,
                            std::size_t peer_bytes) {
        const auto d = reader.template get<RecvDescription>();
        if (d.bytes != peer_bytes || d.inbox == 0 || (d.bytes > 0 && d.buffer == 0)) {
            reader.malformed("the receive window describes " + std::to_string(d.bytes) +
                             " B at inbox " + std::to_string(d.inbox) + " but announced " +
                             std::to_string(peer_bytes) + " B");
        }
        const auto peer_rails = reader.template get<std::uint32_t>();
        if (peer_rails == 0 || peer_rails > max_rails) {
            reader.malformed("the receive window announces " + std::to_string(peer_rails) +
                             " rails");
        }
        std::vector<Blob> inbox_keys;
        std::vector<Blob> buffer_keys;
        for (std::uint32_t i = 0; i < peer_rails; ++i) {
            inbox_keys.push_back(T::get_key(reader, "inbox", at()));
            buffer_keys.push_back(T::get_key(reader, "receive buffer", at()));
        }
        const std::size_t rails = std::min<std::size_t>(connection.rails(), peer_rails);
        // Some transports cannot unpack the keys of a dead process's memory (UCX crashes).
        if (!connection.peer_alive()) {
            raise<PeerLost>("the peer process exited before its receive window was used", at());
        }
        connection_ = &connection;
        receiver_id_ = d.id;
        peer_bytes_ = d.bytes;
        inbox_address_ = d.inbox;
        buffer_address_ = d.buffer;
        for (std::size_t rail = 0; rail < rails; ++rail) {
            inbox_keys_.push_back(T::unpack(connection, rail, inbox_keys[rail], "inbox", at()));
            if (d.bytes > 0) {
                buffer_keys_.push_back(
                    T::unpack(connection, rail, buffer_keys[rail], "receive buffer", at()));
            }
        }
        // From now on the receiver may release the memory behind the keys.
        Notice connected;
        connected.target = receiver_id_;
        connected.from = id_;
        connected.kind = NoticeKind::sender_connected;
        T::notify(connection, 0, connected, false, at());
        signal_by_message_ = signal_by_message;
        return d;
    }

    /// The provider writes by loads and stores instead (it mapped the inbox): close() then only
    /// tells the receiver.
    void use_load_store() noexcept { load_store_ = true; }

    /// The message path of protocol.hpp instead of puts (after connect): every round is one
    /// message per rail that carries pieces, with the data, and no fence. `eager_bytes`: pieces
    /// below this size reach the receiver with their data (0: every size), which lets rounds of
    /// receive windows up to ahead_bytes run ahead of their credits. `chunk_bytes`: such a piece
    /// larger than this travels as several messages of at most this size each (0: one message),
    /// the size the transport delivers in one go (UCX over TCP: one receive segment, where a
    /// larger eager message is reassembled and copied once more). `stream`: flag every message
    /// of this window stream_flag (protocol.hpp; the transport carries them through a stream of
    /// its own, in order).
    void use_messages(std::size_t eager_bytes, std::size_t chunk_bytes = 0,
                      bool stream = false) noexcept {
        static_assert(has_piece_messages<T>::value,
                      "the message path needs T::send (see the top of rails/put_path.hpp)");
        messages_ = true;
        signal_by_message_ = true;
        eager_bytes_ = eager_bytes;
        chunk_bytes_ = chunk_bytes;
        stream_flags_ = stream ? stream_flag : 0;
        window_ahead_ =
            peer_bytes_ <= copy_channel::inline_capacity ||
            (peer_bytes_ <= ahead_bytes && (eager_bytes == 0 || peer_bytes_ < eager_bytes));
    }

    const typename T::RemoteKey& inbox_key(std::size_t rail) const { return inbox_keys_[rail]; }
    const typename T::RemoteKey* buffer_key(std::size_t rail) const {
        return rail < buffer_keys_.size() ? &buffer_keys_[rail] : nullptr;
    }

    void post(const std::byte* data, std::size_t bytes) {
        pieces_.assign(1, RailRange{0, bytes, 0});
        rails_used_ = 1;
        bytes_ = bytes;
        begin(data);
    }

    void post(const std::byte* data, const RailRange* ranges, std::size_t count) {
        pieces_.clear();
        rails_used_ = 1;
        bytes_ = count > 0 ? ranges[count - 1].offset + ranges[count - 1].bytes : 0;
        for (std::size_t i = 0; i < count; ++i) {
            const RailRange& r = ranges[i];
            if (r.bytes == 0) {
                continue;
            }
            rails_used_ = std::max(rails_used_, r.rail + 1);
            if (!pieces_.empty() && pieces_.back().rail == r.rail) {
                pieces_.back().bytes += r.bytes; // the core checked that the pieces are contiguous
            } else {
                pieces_.push_back(r);
            }
        }
        begin(data);
    }

    ~RailSender() { unlist(); }

    /// Progress; true once the round is complete (and on every call until the next post). Also
    /// starts the rounds this thread posted on other send windows whose credits have landed since.
    bool progress() {
        if (waiting_rounds().count.load(std::memory_order_relaxed) != 0) {
            start_waiting_rounds();
        }
        if (!listed_.load(std::memory_order_relaxed)) {
            return advance();
        }
        // Listed: another window's progress on the posting thread may be starting this round.
        if (busy_.exchange(true, std::memory_order_acquire)) {
            return false;
        }
        struct Release {
            std::atomic<bool>& busy;
            ~Release() { busy.store(false, std::memory_order_release); }
        } release{busy_};
        if (started_with_error_) {
            std::rethrow_exception(std::exchange(started_with_error_, nullptr));
        }
        return advance();
    }

private:
    // Rounds posted before their credit landed start in a later progress(): of their own window,
    // or of any other send window of the thread that posted them, so that a thread that posts to
    // several peers and then waits on them one by one keeps every rail busy (otherwise each round
    // would start only once the waits before it have finished). Per transport, process-wide.
    struct WaitingRounds {
        std::mutex mutex;
        std::vector<RailSender*> senders; ///< listed: posted rounds waited for their credit
        std::atomic<std::size_t> count{0};
    };
    static WaitingRounds& waiting_rounds() noexcept {
        // Never destroyed: windows may outlive statics. Out of memory here ends the program.
        static auto* rounds = new WaitingRounds(); // NOLINT(bugprone-unhandled-exception-at-new)
        return *rounds;
    }

    void list_waiting() noexcept {
        WaitingRounds& w = waiting_rounds();
        std::lock_guard<std::mutex> lock(w.mutex);
        poster_ = std::this_thread::get_id();
        if (listed_.load(std::memory_order_relaxed)) {
            return;
        }
        try {
            w.senders.push_back(this);
        } catch (const std::bad_alloc&) {
            return; // then it starts in its own progress only
        }
        listed_.store(true, std::memory_order_relaxed);
        w.count.fetch_add(1, std::memory_order_relaxed);
    }

    void unlist() noexcept {
        if (!listed_.load(std::memory_order_relaxed)) {
            return;
        }
        WaitingRounds& w = waiting_rounds();
        std::lock_guard<std::mutex> lock(w.mutex);
        auto it = std::find(w.senders.begin(), w.senders.end(), this);
        if (it != w.senders.end()) {
            *it = w.senders.back();
            w.senders.pop_back();
            w.count.fetch_sub(1, std::memory_order_relaxed);
        }
        listed_.store(false, std::memory_order_relaxed);
    }

    void start_waiting_rounds() noexcept {
        static thread_local bool starting = false;
        if (starting) {
            return;
        }
        starting = true;
        WaitingRounds& w = waiting_rounds();
        const auto me = std::this_thread::get_id();
        std::lock_guard<std::mutex> lock(w.mutex);
        for (std::size_t i = 0; i < w.senders.size();) {
            RailSender* s = w.senders[i];
            if (s == this || s->poster_ != me ||
                s->busy_.exchange(true, std::memory_order_acquire)) {
                ++i;
                continue;
            }
            if (s->phase_ == Phase::credit && !s->started_with_error_) {
                try {
                    s->advance();
                } catch (...) {
                    s->started_with_error_ = std::current_exception(); // its own progress throws it
                }
            }
            const bool waiting = s->phase_ == Phase::credit && !s->started_with_error_;
            s->busy_.store(false, std::memory_order_release);
            if (waiting) {
                ++i;
            } else {
                s->listed_.store(false, std::memory_order_relaxed);
                w.senders[i] = w.senders.back();
                w.senders.pop_back();
                w.count.fetch_sub(1, std::memory_order_relaxed);
            }
        }
        starting = false;
    }

    bool advance() {
        try {
            if (phase_ == Phase::credit && !start()) {
                return false;
            }
            if (phase_ == Phase::completing) {
                if (!finished()) {
                    return false;
                }
                if (messages_) {
                    // A piece sent by rendezvous is read from the source (and written into the
                    // receiver's memory) until its request completes.
                    end_writing();
                }
                phase_ = Phase::idle;
            }
            return true;
        } catch (...) {
            end_writing();
            phase_ = Phase::idle;
            // Operations issued before the failure may still read their headers and sources,
            // which the next round would overwrite: they are kept (close() waits for them, or
            // keeps this object), and the window sends no more.
            broken_ = !requests_.empty();
            if (!broken_) {
                requests_.clear();
            }
            throw;
        }
    }

public:
    bool receiver_closed() const noexcept {
        return (flags_.load(std::memory_order_acquire) & revoked_bit) != 0 ||
               cell_.word->load(std::memory_order_acquire) == revoked_credit;
    }

    std::uint64_t id() const noexcept { return id_; }
    Connection* connection() const noexcept { return connection_; }
    /// The highest round the receiver has granted so far (tests).
    std::uint64_t credit() const noexcept { return cell_.word->load(std::memory_order_acquire); }

private:
    enum class Phase : std::uint8_t {
        idle,       ///< no round pending
        credit,     ///< waiting for the receiver's credit
        completing, ///< everything issued; waiting until the network no longer reads the sources
    };

    /// What the put path writes of a slot before its sequence word: bytes, delivery, then data.
    static constexpr std::size_t slot_header_offset = offsetof(copy_channel::Slot, bytes);
    static constexpr std::size_t slot_header_bytes =
        offsetof(copy_channel::Slot, data) - slot_header_offset;

    const std::string& at() const noexcept { return *where_; }

    std::uint64_t slot_address(std::uint64_t round) const noexcept {
        return inbox_address_ + offsetof(Inbox, block) +
               offsetof(copy_channel::ControlBlock, slots) +
               (round % copy_channel::slot_count) * sizeof(copy_channel::Slot);
    }

    void begin(const std::byte* data) {
        if (broken_) {
            if (!connection_->peer_alive()) {
                raise<PeerLost>("the peer process exited", at());
            }
            raise<ProviderError>("a send of an earlier round failed after part of it was issued; "
                                 "this window sends no more",
                                 at(), "Destroy the window; the connection is likely broken too.");
        }
        if (listed_.load(std::memory_order_relaxed) && poster_ != std::this_thread::get_id()) {
            unlist(); // the window moved to this thread: the one that posted before lets go of it
        }
        ++round_;
        source_ = data;
        phase_ = Phase::credit;
        progress();
        if (phase_ == Phase::credit) {
            list_waiting();
        }
    }

    // Issues the round once the credit of round n is there.
    bool start() {
        const std::uint64_t credit = cell_.word->load(std::memory_order_acquire);
        if (credit == revoked_credit || (flags_.load(std::memory_order_acquire) & revoked_bit)) {
            receiver_gone();
        }
        // Rounds that fit a notice, and every round of a small window, may run ahead of the
        // credit on the message path (protocol.hpp).
        const bool ahead = messages_ && (window_ahead_ || bytes_ <= copy_channel::inline_capacity);
        if (credit < round_ && (!ahead || credit + ahead_rounds < round_)) {
            // The credit lands on rail 0, but the peer may grant it only once this side has
            // progressed the others (its send to this side finished).
            connection_->progress();
            return false;
        }
        // From here on the network writes into the receiver's memory: a revocation that arrives
        // now waits for this round's signal (see Registry::handle).
        if ((flags_.fetch_or(writing_bit, std::memory_order_acq_rel) & revoked_bit) != 0) {
            end_writing();
            receiver_gone();
        }
        const std::uint64_t slot = slot_address(round_);
        if ((bytes_ > 0 || messages_) && bytes_ <= copy_channel::inline_capacity &&
            signal_by_message_) {
            // One notice carries a small message whole: a put costs a message of its own where
            // the transport emulates puts.
            Notice& notice = arrival(0, 0, flags(credit));
            carry_credit(notice);
            try {
                keep(T::signal(*connection_, 0, notice, source_, bytes_, at()));
            } catch (...) {
                return_credit(notice);
                throw;
            }
            end_writing();
            phase_ = Phase::completing;
            return true;
        }
        if (bytes_ <= copy_channel::inline_capacity) {
            // Slot and sequence word go to the inbox over one lane, which a fence orders.
            image_.bytes = bytes_;
            image_.delivery = copy_channel::Delivery::inlined;
            image_.reserved = 0;
            if (bytes_ > 0) {
                std::memcpy(image_.data, source_, bytes_);
            }
            put_slot(slot, slot_header_bytes + bytes_);
            return true;
        }
        if constexpr (has_piece_messages<T>::value) {
            if (messages_) {
                send_pieces(flags(credit));
                return true;
            }
        }
        std::uint16_t other_rails = 0;
        for (const RailRange& piece : pieces_) {
            keep(T::put(*connection_, piece.rail, buffer_keys_[piece.rail], source_ + piece.offset,
                        piece.bytes, buffer_address_ + piece.offset, at()));
            if (piece.rail != 0) {
                other_rails = static_cast<std::uint16_t>(other_rails | (1U << piece.rail));
            }
        }
        other_rails_used_ |= other_rails;
        // Each rail signals its own pieces after them, on the same lane; rail 0 also the round.
        for (std::size_t rail = 1; rail < rails_used_; ++rail) {
            if ((other_rails & (1U << rail)) == 0) {
                continue;
            }
            T::fence(*connection_, rail, at());
            if (signal_by_message_) {
                keep(T::signal(*connection_, rail, arrival(rail, 0), nullptr, 0, at()));
            } else {
                rail_rounds_[rail] = round_;
                keep(T::put(*connection_, rail, inbox_keys_[rail], &rail_rounds_[rail],
                            sizeof(std::uint64_t),
                            inbox_address_ + offsetof(Inbox, rail_round) +
                                rail * sizeof(std::uint64_t),
                            at()));
            }
        }
        if (signal_by_message_) {
            T::fence(*connection_, 0, at());
            keep(T::signal(*connection_, 0, arrival(0, other_rails), nullptr, 0, at()));
            end_writing();
            phase_ = Phase::completing;
        } else {
            image_.bytes = bytes_;
            image_.delivery = copy_channel::Delivery::direct;
            image_.reserved = other_rails;
            put_slot(slot, slot_header_bytes);
        }
        return true;
    }

    // The message path: one message per piece (per chunk of an eager piece larger than
    // chunk_bytes_), each with its data; the receiver publishes the round once all bytes landed.
    // The writing bit stays set until the sends complete.
    void send_pieces(std::uint16_t round_flags) {
        std::size_t messages = 0;
        for (const RailRange& piece : pieces_) {
            messages += chunks_of(piece.bytes);
        }
        piece_headers_.resize(messages); // capacity kept: no allocation in the steady state
        requests_.reserve(requests_.size() + messages); // keep() cannot throw once a send is out
        std::size_t next = 0;
        bool carrier = true; // the first eager message on rail 0 carries a waiting credit
        for (const RailRange& piece : pieces_) {
            const std::size_t chunks = chunks_of(piece.bytes);
            std::size_t offset = 0;
            for (std::size_t i = 0; i < chunks; ++i) {
                const std::size_t bytes = i + 1 < chunks ? chunk_bytes_ : piece.bytes - offset;
                Piece& header = piece_headers_[next++];
                header.notice = arrival(piece.rail, 0, round_flags);
                header.offset = piece.offset + offset;
                const bool carries = carrier && piece.rail == 0 && eager(piece.bytes);
                if (carries) {
                    carry_credit(header.notice);
                    carrier = false;
                }
                try {
                    keep(T::send(*connection_, piece.rail, header, source_ + header.offset, bytes,
                                 at()));
                } catch (...) {
                    if (carries) {
                        return_credit(header.notice);
                    }
                    throw;
                }
                offset += bytes;
            }
            if (piece.rail != 0) {
                other_rails_used_ |= 1U << piece.rail;
            }
        }
        phase_ = Phase::completing;
    }

    /// Whether a piece of `bytes` reaches the receiver with its data (no rendezvous).
    bool eager(std::size_t bytes) const noexcept {
        return eager_bytes_ == 0 || bytes < eager_bytes_;
    }

    /// Messages that carry a piece of `bytes` on the message path.
    std::size_t chunks_of(std::size_t bytes) const noexcept {
        if (!eager(bytes) || chunk_bytes_ == 0 || bytes <= chunk_bytes_) {
            return 1;
        }
        return 1 + (bytes - 1) / chunk_bytes_;
    }

    /// The flags of the message path's notices and pieces (protocol.hpp).
    std::uint16_t flags(std::uint64_t credit) const noexcept {
        return static_cast<std::uint16_t>((window_ahead_ ? ahead_flag : 0) |
                                          (credit < round_ ? early_flag : 0) | stream_flags_);
    }

    // A credit that a receive window of this connection left to be carried (protocol.hpp), on a
    // message that reaches the peer whole.
    void carry_credit(Notice& notice) noexcept {
        if constexpr (has_credit_carrier<T>::value) {
            connection_->credits().carry(notice);
        }
    }

    // The send that was to carry `notice`'s credit failed: the credit waits for the next message
    // again (or for its receiver's own notice), unless the carrier has filled up meanwhile.
    void return_credit(const Notice& notice) noexcept {
        if constexpr (has_credit_carrier<T>::value) {
            if (notice.credit_target != 0) {
                (void)connection_->credits().leave(notice.credit_target, notice.credit_round);
            }
        }
    }

    Notice& arrival(std::size_t rail, std::uint16_t other_rails, std::uint16_t round_flags = 0) {
        Notice& n = signals_[rail];
        n.target = receiver_id_;
        n.from = id_;
        n.round = round_;
        n.bytes = bytes_;
        n.kind = NoticeKind::arrived;
        n.rail = static_cast<std::uint16_t>(rail);
        n.rails = other_rails;
        n.flags = round_flags;
        n.credit_target = 0;
        n.credit_round = 0;
        return n;
    }

    // The slot's first `bytes` from image_ (header, then inline data), then its sequence word.
    void put_slot(std::uint64_t slot, std::size_t bytes) {
        sequence_ = round_;
        const std::uint64_t header = slot + slot_header_offset;
        const std::uint64_t sequence = slot + offsetof(copy_channel::Slot, sequence);
        if constexpr (has_put_pair<T>::value) {
            auto requests = T::put_pair(*connection_, 0, inbox_keys_[0], &image_.bytes, bytes,
                                        header, &sequence_, sizeof sequence_, sequence, at());
            keep(std::move(requests.first));
            keep(std::move(requests.second));
        } else {
            keep(T::put(*connection_, 0, inbox_keys_[0], &image_.bytes, bytes, header, at()));
            T::fence(*connection_, 0, at());
            keep(T::put(*connection_, 0, inbox_keys_[0], &sequence_, sizeof sequence_, sequence,
                        at()));
        }
        end_writing();
        phase_ = Phase::completing;
    }

    bool finished() {
        if (requests_.empty()) {
            return true;
        }
        connection_->progress();
        auto pending = std::remove_if(requests_.begin(), requests_.end(),
                                      [&](auto& r) { return r.done("put", at()); });
        requests_.erase(pending, requests_.end());
        return requests_.empty();
    }

    void keep(typename T::Request request) {
        if (request.pending()) {
            requests_.push_back(std::move(request));
        }
    }

    void end_writing() noexcept { flags_.fetch_and(~writing_bit, std::memory_order_acq_rel); }

    [[noreturn]] void receiver_gone() const {
        raise<PeerLost>("the peer destroyed its receive window", at(),
                        "Keep windows alive until both sides have finished their last round.");
    }

    std::shared_ptr<typename T::Process> process_;
    const std::string* where_;
    std::uint64_t id_ = 0;
    CreditCell cell_;
    Blob cell_key_;
    /// writing_bit and revoked_bit, shared with the registry's notice handler.
    std::atomic<std::uint32_t> flags_{0};

    Connection* connection_ = nullptr;
    std::uint64_t receiver_id_ = 0;
    std::vector<typename T::RemoteKey> inbox_keys_;  ///< one per rail
    std::vector<typename T::RemoteKey> buffer_keys_; ///< one per rail
    std::uint64_t inbox_address_ = 0;
    std::uint64_t buffer_address_ = 0;
    bool load_store_ = false;

    bool signal_by_message_ = false; ///< notices instead of fence and sequence put
    bool messages_ = false;          ///< the message path (use_messages())
    bool window_ahead_ = false;      ///< every round may run ahead of its credit (protocol.hpp)
    std::size_t eager_bytes_ = 0;    ///< pieces from this size on go by rendezvous (0: none)
    std::size_t chunk_bytes_ = 0;    ///< largest message of an eager piece (0: no limit)
    std::uint16_t stream_flags_ = 0; ///< stream_flag where the receive window is large
    std::size_t peer_bytes_ = 0;     ///< of the receive window
    // Starting rounds from other windows' progress (WaitingRounds), guarded by its mutex.
    std::atomic<bool> listed_{false};
    std::atomic<bool> busy_{false}; ///< a listed window's round is being advanced
    std::thread::id poster_{};
    std::exception_ptr started_with_error_; ///< from a start on another window's progress
    bool broken_ = false;                   ///< a send failed after others of its round were issued
    std::vector<Piece> piece_headers_; ///< of the current round, valid until `requests_` are done
    std::uint64_t round_ = 0;
    Phase phase_ = Phase::idle;
    const std::byte* source_ = nullptr;
    std::size_t bytes_ = 0;
    std::vector<RailRange> pieces_;      ///< of the current round, coalesced per rail
    std::size_t rails_used_ = 1;         ///< rails the round touches: 0 .. rails_used - 1
    std::uint32_t other_rails_used_ = 0; ///< mask of the rails above 0 that ever carried pieces
    std::vector<typename T::Request> requests_;
    // Sources of the puts and notices, valid until `requests_` are done.
    copy_channel::Slot image_;
    std::uint64_t sequence_ = 0;
    std::uint64_t rail_rounds_[max_rails] = {};
    Notice signals_[max_rails];
};

// -------------------------------------------------------------------------------------------------
// Receiver
// -------------------------------------------------------------------------------------------------

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
