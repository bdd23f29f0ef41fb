// SPDX-License-Identifier: MIT
#include "bootstrap/setup_link.hpp"

#include "bootstrap/mpi_process.hpp"
#include "bootstrap/post_office.hpp"

#include "base/backoff.hpp"
#include "base/environment.hpp"
#include "base/library_target.hpp"
#include "base/node.hpp"
#include "base/peer_process.hpp"

#include <pmr/target.hpp>

#include <cstdio>
#include <utility>

namespace pmr::detail::bootstrap {

SetupLink::SetupLink(const Target& target)
    : record_(target.record()), peer_(target.rank()), own_rank_(target.own_rank()),
      send_tag_(target.send_tag()), recv_tag_(target.recv_tag()),
      space_(TargetAccess::is_library(target) ? 1U : 0U) {
    note_setup_thread();
    comm_ = record_ ? record_->setup : target.comm();
    generation_ = generation_of(comm_);
    auto& office = post_office();
    std::lock_guard<std::mutex> lock(office.mutex);
    ordinal_ =
        office.ordinals[PostOffice::LinkKey{generation_, space_, peer_, send_tag_, recv_tag_}]
            .next();
}

SetupLink::~SetupLink() {
    auto& office = post_office();
    std::lock_guard<std::mutex> lock(office.mutex);
    // Take what the peer sent for this connection out of MPI, so that the messages of connections
    // that were never used do not pile up there (only from the thread that makes set-up calls,
    // and only while MPI runs; the messages still on their way are dropped when they arrive).
    if (office.setup_thread.load(std::memory_order_relaxed) == std::this_thread::get_id() &&
        mpi_active() && office.freed.count(generation_) == 0) {
        try {
            office.collect_incoming(comm_, generation_, peer_, tag_base() + recv_tag_, tag_base());
        } catch (const std::exception&) {
            office.unreported = std::current_exception();
        }
    }
    const PostOffice::LinkKey link{generation_, space_, peer_, send_tag_, recv_tag_};
    auto ordinals = office.ordinals.find(link);
    if (ordinals == office.ordinals.end()) {
        return; // the communicator was freed: nothing is kept for it
    }
    try {
        ordinals->second.retire(ordinal_);
    } catch (const std::bad_alloc&) { // NOLINT(bugprone-empty-catch): late messages then linger
    }
    for (auto it = office.inbox.lower_bound({link, ordinal_, 0, 0});
         it != office.inbox.end() && std::get<0>(it->first) == link &&
         std::get<1>(it->first) == ordinal_;) {
        it = office.inbox.erase(it);
    }
    for (auto it = office.withdrawn.lower_bound({link, ordinal_, 0, 0});
         it != office.withdrawn.end() && std::get<0>(it->first) == link &&
         std::get<1>(it->first) == ordinal_;) {
        it = office.withdrawn.erase(it);
    }
}

void SetupLink::check_alive() const {
    if (!mpi_active()) {
        raise<BootstrapError>("MPI is finalised",
                              "connection set-up, rank " + std::to_string(own_rank_) + " -> peer " +
                                  std::to_string(peer_),
                              "Create and first use pmr objects between MPI_Init and "
                              "MPI_Finalize.");
    }
    // Called with the office's mutex held.
    if (post_office().freed.count(generation_) != 0) {
        raise<UsageError>(
            "the communicator of this connection was freed before the connection was set up",
            "rank " + std::to_string(own_rank_) + " -> peer " + std::to_string(peer_),
            "Keep the MPI communicator until every connection and window made on it has been "
            "used once, or wrap it in a pmr::Communicator, which keeps what it needs.");
    }
}

void SetupLink::send(Kind kind, std::uint32_t index, const Blob& payload) {
    note_setup_thread();
    Header h{magic, space_, ordinal_, static_cast<std::uint32_t>(kind), index, recv_tag_};
    auto buffer = std::make_unique<Blob>(sizeof h + payload.size());
    std::memcpy(buffer->data(), &h, sizeof h);
    std::copy(payload.begin(), payload.end(), buffer->begin() + sizeof h);

    auto& office = post_office();
    std::lock_guard<std::mutex> lock(office.mutex);
    check_alive();
    office.collect_sends();
    MPI_Request request = MPI_REQUEST_NULL;
    check(MPI_Isend(buffer->data(), static_cast<int>(buffer->size()), MPI_BYTE, peer_,
                    tag_base() + send_tag_, comm_, &request),
          "MPI_Isend");
    office.outgoing.push_back({request, std::move(buffer)});
    // Small messages usually complete at once: then nothing counts as in flight, and the data
    // path's waits never call MPI for them (progress_sends()).
    office.collect_sends();
}

void SetupLink::withdraw(Kind own, std::uint32_t index, std::function<void()> on_peer_withdrawn,
                         const WithdrawReason& reason) noexcept {
    auto& office = post_office();
    const Kind peer_kind = own == Kind::send_window ? Kind::recv_window : Kind::send_window;
    const PostOffice::InboxKey key{
        PostOffice::LinkKey{generation_, space_, peer_, send_tag_, recv_tag_}, ordinal_,
        static_cast<std::uint32_t>(peer_kind), index};
    std::function<void()> run_now;
    {
        std::lock_guard<std::mutex> lock(office.mutex);
        if (office.setup_thread.load(std::memory_order_relaxed) != std::this_thread::get_id() ||
            !mpi_active() || office.freed.count(generation_) != 0) {
            return;
        }
        // Take in what the peer sent on this connection: on a connection that lives on while
        // windows come and go unused, nothing else reads the peer's withdrawals, so what waits
        // for them (memory, files, the peer's descriptions) would pile up until the connection
        // goes.
        try {
            office.collect_incoming(comm_, generation_, peer_, tag_base() + recv_tag_, tag_base());
        } catch (const std::exception&) {
            office.unreported = std::current_exception();
        }
        // The peer's description of the matching window, if it came, is of no use any more.
        office.inbox.erase(key);
        try {
            auto done = office.withdrawn.find(key);
            if (done != office.withdrawn.end()) {
                office.withdrawn.erase(done);
                run_now = std::move(on_peer_withdrawn);
            } else {
                // Also when there is nothing to run: the peer's withdrawal is then consumed
                // here instead of being kept as the news of a window this side may still use.
                office.on_withdrawal[key] = std::move(on_peer_withdrawn);
            }
        } catch (const std::bad_alloc&) { // NOLINT(bugprone-empty-catch): kept until exit then
        }
    }
    try {
        BlobWriter message;
        message.put(static_cast<std::uint32_t>(own));
        if (reason.cause != WithdrawCause::unused) {
            message.put(static_cast<std::uint32_t>(reason.cause)).put_string(reason.message);
        }
        send(Kind::withdrawn, index, message.take());
    } catch (const std::exception&) { // NOLINT(bugprone-empty-catch)
        // The peer's matching window then waits for a description that never comes, as it
        // would without the withdrawal (PMR_TIMEOUT ends that wait).
    }
    if (run_now) {
        run_now();
    }
}

std::optional<Blob> SetupLink::try_receive(Kind kind, std::uint32_t index,
                                           const std::string* where) {
    note_setup_thread();
    auto& office = post_office();
    const PostOffice::InboxKey key{
        PostOffice::LinkKey{generation_, space_, peer_, send_tag_, recv_tag_}, ordinal_,
        static_cast<std::uint32_t>(kind), index};
    std::lock_guard<std::mutex> lock(office.mutex);
    check_alive();
    if (office.unreported) {
        std::rethrow_exception(std::exchange(office.unreported, nullptr));
    }
    office.collect_sends();
    office.collect_incoming(comm_, generation_, peer_, tag_base() + recv_tag_, tag_base());
    auto it = office.inbox.find(key);
    if (it != office.inbox.end()) {
        Blob message = std::move(it->second);
        office.inbox.erase(it);
        return message;
    }
    // A withdrawal without a description: the peer's window never sent one (its provider was not
    // decided yet, or its constructor failed). With a description, the caller checks what it can
    // first (sizes) and then asks raise_if_withdrawn().
    if (kind == Kind::send_window || kind == Kind::recv_window) {
        auto withdrawn = office.withdrawn.find(key);
        if (withdrawn != office.withdrawn.end()) {
            raise_withdrawn(kind, index, withdrawn->second,
                            where != nullptr ? *where
                                             : "rank " + std::to_string(own_rank_) + " -> peer " +
                                                   std::to_string(peer_) + ", send tag " +
                                                   std::to_string(send_tag_) + ", recv tag " +
                                                   std::to_string(recv_tag_));
        }
    }
    return std::nullopt;
}

void SetupLink::raise_if_withdrawn(Kind kind, std::uint32_t index, const std::string& where) {
    auto& office = post_office();
    const PostOffice::InboxKey key{
        PostOffice::LinkKey{generation_, space_, peer_, send_tag_, recv_tag_}, ordinal_,
        static_cast<std::uint32_t>(kind), index};
    WithdrawReason reason;
    {
        std::lock_guard<std::mutex> lock(office.mutex);
        auto withdrawn = office.withdrawn.find(key);
        if (withdrawn == office.withdrawn.end()) {
            return;
        }
        reason = withdrawn->second;
    }
    raise_withdrawn(kind, index, reason, where);
}

void SetupLink::raise_withdrawn(Kind kind, std::uint32_t index, const WithdrawReason& reason,
                                const std::string& where) const {
    const std::string peer_window =
        std::string(kind_text(static_cast<std::uint32_t>(kind))) + " #" + std::to_string(index);
    const std::string unpaired = ", so this side's window #" + std::to_string(index) +
                                 " has no partner (windows created after it still pair)";
    if (reason.cause == WithdrawCause::unused) {
        raise<UsageError>("the peer destroyed its " + peer_window + " without using it" + unpaired,
                          where,
                          "Windows pair in creation order: both sides must create the k-th "
                          "window of a connection and use it, or both destroy it unused.");
    }
    // The peer's own message names its limit and how to raise it; its "pmr: " is not repeated.
    const std::string prefix = "pmr: ";
    const std::string peer_error = reason.message.rfind(prefix, 0) == 0
                                       ? reason.message.substr(prefix.size())
                                       : reason.message;
    const std::string what = "the peer (rank " + std::to_string(peer_) + ") could not create its " +
                             peer_window + unpaired + "; the peer's error: " + peer_error;
    if (reason.cause == WithdrawCause::resource_limit) {
        raise<ResourceError>(what, where,
                             "The peer hit a limit that this rank did not: raise that limit for "
                             "rank " +
                                 std::to_string(peer_) +
                                 " as its error says (it is told the same), or create fewer or "
                                 "smaller windows on it.");
    }
    raise<ProviderError>(what, where,
                         "See the peer's error; rank " + std::to_string(peer_) +
                             " raised it from the window's constructor.");
}

Blob SetupLink::receive(Kind kind, std::uint32_t index, const WaitContext& context) {
    const std::string& where = *context.where;
    PeerProcess watched(context.watch);
    Backoff backoff;
    bool warned = false;
    std::uint32_t polls = 0;
    for (;;) {
        if (auto message = try_receive(kind, index, &where)) {
            return std::move(*message);
        }
        // Other connections' hellos are answered every few polls: often enough that a peer
        // waiting for one of them is not held up, rarely enough that a wait does not probe MPI
        // for every connection on every poll.
        if (context.progress != nullptr && (++polls & 15U) == 0) {
            context.progress();
        }
        if (!backoff.pause()) {
            continue;
        }
        if (!watched.alive()) {
            raise<PeerLost>("the peer process exited before it created its side", where,
                            "Check the peer's output for the reason it died.");
        }
        if (backoff.expired()) {
            raise<Timeout>("the peer did not create its side within PMR_TIMEOUT (" +
                               std::to_string(settings().timeout_seconds) + " s)",
                           where,
                           "Every connection needs a matching Connection on the peer "
                           "(Target(comm, me, recvTag, sendTag)) and every window a matching "
                           "window of the other kind, created in the same order.");
        }
        const double warn_after = settings().warn_after_seconds;
        if (!warned && warn_after > 0 && backoff.elapsed_seconds() >= warn_after) {
            warned = true;
            std::string unclaimed;
            {
                auto& office = post_office();
                std::lock_guard<std::mutex> lock(office.mutex);
                if (record_) {
                    // pmr's own duplicate: every message on it is pmr's, so look at all of them.
                    office.collect_incoming(comm_, generation_, peer_, MPI_ANY_TAG, tag_base());
                } else {
                    // The application's communicator: take pmr's messages (tags from the base
                    // on) as long as one of them is the next from that peer.
                    for (;;) {
                        int found = 0;
                        MPI_Status status;
                        check(MPI_Iprobe(peer_, MPI_ANY_TAG, comm_, &found, &status), "MPI_Iprobe");
                        if (found == 0 || status.MPI_TAG < tag_base()) {
                            break;
                        }
                        office.collect_incoming(comm_, generation_, peer_, status.MPI_TAG,
                                                tag_base());
                    }
                }
                unclaimed = office.unclaimed_from(generation_, peer_);
            }
            std::fprintf(stderr,
                         "pmr: warning: waited %.0f s for the peer's %s%s [%s]. %s. This side "
                         "expects the peer's matching object with send tag %d and recv tag %d "
                         "(its Target(comm, %d, %d, %d)). It keeps waiting%s.\n",
                         backoff.elapsed_seconds(), kind_text(static_cast<std::uint32_t>(kind)),
                         kind == Kind::send_window || kind == Kind::recv_window
                             ? (" #" + std::to_string(index)).c_str()
                             : "",
                         where.c_str(),
                         unclaimed.empty()
                             ? "Nothing from that peer has arrived that no object here took"
                             : ("Unclaimed set-up messages from that peer: " + unclaimed).c_str(),
                         recv_tag_, send_tag_, own_rank_, recv_tag_, send_tag_,
                         settings().timeout_seconds > 0 ? " until PMR_TIMEOUT"
                                                        : " (set PMR_TIMEOUT to give up)");
        }
    }
}

std::optional<PeerRecord> SetupLink::known_peer() const {
    if (record_ && peer_ >= 0 && static_cast<std::size_t>(peer_) < record_->peers.size()) {
        return record_->peers[static_cast<std::size_t>(peer_)];
    }
    auto& office = post_office();
    std::lock_guard<std::mutex> lock(office.mutex);
    const int world = world_rank_of(comm_, peer_);
    if (world < 0) {
        return std::nullopt;
    }
    auto it = office.peers.find(world);
    if (it != office.peers.end()) {
        return it->second;
    }
    if (single_node_job()) {
        return PeerRecord{0, node_key(), node_name()};
    }
    return std::nullopt;
}

void SetupLink::learn(const PeerRecord& peer) const {
    auto& office = post_office();
    std::lock_guard<std::mutex> lock(office.mutex);
    const int world = world_rank_of(comm_, peer_);
    if (world >= 0) {
        office.peers[world] = peer;
    }
}

} // namespace pmr::detail::bootstrap
