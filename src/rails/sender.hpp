// SPDX-License-Identifier: MIT
// The sending side of the put path (put_path.hpp): credits, slots, sequence words, multi-rail
// rounds and teardown of a send window, over a rail transport (contract.hpp).
#pragma once

#include "rails/contract.hpp"
#include "rails/pieces.hpp"

namespace pmr::detail::rails {

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
                      "the message path needs T::send (see the top of rails/contract.hpp)");
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
        post_pieces(data, ranges, count, 1);
    }
    /// The same with pieces in elements of `element_size` bytes, scaled as they are copied (the
    /// core checked them in elements), so that a typed window's post needs no array of its pieces
    /// in bytes.
    void post(const std::byte* data, const RailSlice* slices, std::size_t count,
              std::size_t element_size) {
        post_pieces(data, slices, count, element_size);
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
    template <class Piece>
    void post_pieces(const std::byte* data, const Piece* pieces, std::size_t count,
                     std::size_t scale) {
        pieces_.clear();
        rails_used_ = 1;
        bytes_ = count > 0
                     ? (piece_start(pieces[count - 1]) + piece_length(pieces[count - 1])) * scale
                     : 0;
        for (std::size_t i = 0; i < count; ++i) {
            const Piece& piece = pieces[i];
            const std::size_t bytes = piece_length(piece) * scale;
            if (bytes == 0) {
                continue;
            }
            rails_used_ = std::max(rails_used_, piece.rail + 1);
            if (!pieces_.empty() && pieces_.back().rail == piece.rail) {
                pieces_.back().bytes += bytes; // the core checked that the pieces are contiguous
            } else {
                pieces_.push_back(RailRange{piece_start(piece) * scale, bytes, piece.rail});
            }
        }
        begin(data);
    }

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
            // Slot and sequence word go to the inbox over one rail, whose fence orders them.
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
        // Each rail signals its own pieces after them, on that rail; rail 0 also the round.
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

} // namespace pmr::detail::rails
