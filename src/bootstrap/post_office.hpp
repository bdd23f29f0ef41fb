// SPDX-License-Identifier: MIT
// The post office: the process-wide state of pmr's set-up messages (used by setup_link.cpp and
// communicator_record.cpp only). Messages that arrive are checked and sorted into an inbox by
// (communicator generation, space, peer, tags, connection ordinal, kind, window index); the
// ordinals of destroyed connections are remembered, so that their late messages are dropped.
#pragma once

#include "bootstrap/setup_link.hpp"

#include "base/blob.hpp"
#include "base/error.hpp"

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

namespace pmr::detail::bootstrap {

constexpr std::uint32_t magic = 0x706d7232; // "pmr2"

struct Header {
    std::uint32_t magic;
    std::uint32_t space;
    std::uint32_t ordinal;
    std::uint32_t kind;
    std::uint32_t index;
    std::int32_t recv_tag; ///< the sender's receive tag (its send tag is the MPI tag)
};

/// Throws BootstrapError for the failed MPI call `call` with return code `rc`.
[[noreturn]] void fail(int rc, const char* call);
/// fail() unless `rc` is MPI_SUCCESS.
void check(int rc, const char* call);
/// What a message of `kind` is, for messages.
const char* kind_text(std::uint32_t kind);

// Connections of one (communicator, space, peer, tags) are numbered in creation order on both
// sides; the numbers of destroyed connections are remembered compactly, so that their late
// messages are dropped instead of accumulating.
class Ordinals {
public:
    std::uint32_t next() noexcept { return next_++; }
    void retire(std::uint32_t ordinal) {
        retired_.insert(ordinal);
        while (!retired_.empty() && *retired_.begin() == below_) {
            retired_.erase(retired_.begin());
            ++below_;
        }
    }
    bool retired(std::uint32_t ordinal) const {
        return ordinal < below_ || retired_.count(ordinal) != 0;
    }

private:
    std::uint32_t next_ = 0;
    std::uint32_t below_ = 0; ///< every ordinal below it is retired
    std::set<std::uint32_t> retired_;
};

// Process-wide state of the set-up traffic. Guarded by a mutex so that set-up from several threads
// (with MPI_THREAD_MULTIPLE) stays consistent.
struct PostOffice {
    // Communicators are told apart by a generation number, not by their handle: MPI reuses the
    // handle of a freed communicator, and a new communicator must start counting afresh.
    // (generation, space, peer, send tag, recv tag) as the receiving connection sees them: a
    // message's key has the sender's receive tag as send tag and its send tag as receive tag.
    using LinkKey = std::tuple<std::uint64_t, std::uint32_t, int, int, int>;
    using InboxKey = std::tuple<LinkKey, std::uint32_t, std::uint32_t, std::uint32_t>;

    struct Outgoing {
        MPI_Request request;
        std::unique_ptr<Blob> buffer;
    };

    std::mutex mutex;
    std::map<LinkKey, Ordinals> ordinals;
    std::map<InboxKey, Blob> inbox;
    // Windows the peer withdrew, keyed by the peer's window kind and index (Kind::withdrawn), and
    // what to run when the peer withdraws the window matching one this side withdrew.
    std::map<InboxKey, WithdrawReason> withdrawn;
    std::map<InboxKey, std::function<void()>> on_withdrawal;
    std::set<std::uint64_t> freed; ///< generations of communicators freed while pmr used them
    /// The error of a malformed message taken in where nothing can be reported (a destructor):
    /// the next set-up call that looks for a message raises it.
    std::exception_ptr unreported;
    std::vector<Outgoing> outgoing;
    std::atomic<std::thread::id> setup_thread{};
    std::uint64_t next_generation = 1;
    std::map<int, PeerRecord> peers; ///< by rank in MPI_COMM_WORLD, from handshakes and node maps

    // Everything known about a communicator that is being freed.
    void forget(std::uint64_t generation) {
        auto drop = [generation](auto& table, auto first_of) {
            for (auto it = table.begin(); it != table.end();) {
                it = std::get<0>(first_of(it->first)) == generation ? table.erase(it)
                                                                    : std::next(it);
            }
        };
        drop(ordinals, [](const LinkKey& k) { return k; });
        drop(inbox, [](const InboxKey& k) { return std::get<0>(k); });
        drop(withdrawn, [](const InboxKey& k) { return std::get<0>(k); });
        drop(on_withdrawal, [](const InboxKey& k) { return std::get<0>(k); });
        freed.insert(generation);
    }

    // Completed sends release their buffers; incomplete ones stay (small messages complete
    // eagerly).
    void collect_sends() {
        for (auto it = outgoing.begin(); it != outgoing.end();) {
            int done = 0;
            check(MPI_Test(&it->request, &done, MPI_STATUS_IGNORE), "MPI_Test");
            it = done != 0 ? outgoing.erase(it) : std::next(it);
        }
        sends_in_flight.store(outgoing.size(), std::memory_order_relaxed);
    }

    // Moves every message that has arrived from `peer` with `tag` (MPI_ANY_TAG only on pmr's own
    // duplicates) into the inbox, after checking its header.
    void collect_incoming(MPI_Comm comm, std::uint64_t generation, int peer, int tag, int base) {
        for (;;) {
            int found = 0;
            MPI_Message message = MPI_MESSAGE_NULL;
            MPI_Status status;
            check(MPI_Improbe(peer, tag, comm, &found, &message, &status), "MPI_Improbe");
            if (found == 0) {
                return;
            }
            int count = 0;
            check(MPI_Get_count(&status, MPI_BYTE, &count), "MPI_Get_count");
            Blob data(static_cast<std::size_t>(count));
            check(MPI_Mrecv(data.data(), count, MPI_BYTE, &message, MPI_STATUS_IGNORE),
                  "MPI_Mrecv");
            const std::string from =
                "from rank " + std::to_string(peer) + ", MPI tag " + std::to_string(status.MPI_TAG);
            Header h{};
            if (data.size() < sizeof h ||
                (std::memcpy(&h, data.data(), sizeof h), h.magic != magic)) {
                raise<BootstrapError>(
                    "a message of " + std::to_string(count) +
                        " B on pmr's set-up tags is not a pmr set-up message",
                    from,
                    "pmr uses the tags above MPI_TAG_UB / 2 of communicators not wrapped by "
                    "pmr::Communicator: the application must not send with those tags, and all "
                    "ranks must run the same pmr version.");
            }
            if (h.kind < static_cast<std::uint32_t>(Kind::hello) ||
                h.kind > static_cast<std::uint32_t>(Kind::withdrawn) || h.space > 1 ||
                h.recv_tag < 0 || h.recv_tag > base) {
                raise<BootstrapError>("a malformed pmr set-up message (kind " +
                                          std::to_string(h.kind) + ", space " +
                                          std::to_string(h.space) + ")",
                                      from, "All ranks must run the same pmr version.");
            }
            data.erase(data.begin(), data.begin() + sizeof h);
            // The sender's send tag is our receive tag and its receive tag our send tag.
            const LinkKey link{generation, h.space, peer, h.recv_tag, status.MPI_TAG - base};
            if (h.kind == static_cast<std::uint32_t>(Kind::withdrawn)) {
                take_withdrawal(link, h, data, from);
                continue;
            }
            auto known = ordinals.find(link);
            if (known != ordinals.end() && known->second.retired(h.ordinal)) {
                continue; // for a connection this side has destroyed already
            }
            const InboxKey key{link, h.ordinal, h.kind, h.index};
            if (!inbox.emplace(key, std::move(data)).second) {
                raise<BootstrapError>(std::string("a duplicate set-up message (") +
                                          kind_text(h.kind) + " #" + std::to_string(h.index) +
                                          " of connection #" + std::to_string(h.ordinal) + ")",
                                      from, "All ranks must run the same pmr version.");
            }
        }
    }

    // The peer withdrew one of its windows: run what this side waits for on that, or remember it
    // (and why the peer withdrew it) for this side's matching window, which then fails at its
    // first use.
    void take_withdrawal(const LinkKey& link, const Header& h, const Blob& data,
                         const std::string& from) {
        // The window's kind, then for a window whose constructor failed the cause and the error.
        std::uint32_t window_kind = 0;
        WithdrawReason reason;
        bool well_formed = false;
        try {
            BlobReader reader(data, from);
            window_kind = reader.get<std::uint32_t>();
            if (!reader.done()) {
                reason.cause = static_cast<WithdrawCause>(reader.get<std::uint32_t>());
                reason.message = reader.get_string();
            }
            reader.finish();
            well_formed = reason.cause == WithdrawCause::unused ||
                          reason.cause == WithdrawCause::resource_limit ||
                          reason.cause == WithdrawCause::failed;
        } catch (const ProviderError&) { // NOLINT(bugprone-empty-catch): reported just below
        }
        if (!well_formed || (window_kind != static_cast<std::uint32_t>(Kind::send_window) &&
                             window_kind != static_cast<std::uint32_t>(Kind::recv_window))) {
            raise<BootstrapError>("a malformed pmr set-up message (withdrawal of " +
                                      std::to_string(data.size()) + " B, window kind " +
                                      std::to_string(window_kind) + ")",
                                  from, "All ranks must run the same pmr version.");
        }
        const InboxKey key{link, h.ordinal, window_kind, h.index};
        auto waiting = on_withdrawal.find(key);
        if (waiting != on_withdrawal.end()) {
            // Both sides withdrew: a description the peer sent before its withdrawal (MPI keeps
            // their order) is of no use either.
            inbox.erase(key);
            auto run = std::move(waiting->second);
            on_withdrawal.erase(waiting);
            if (run) {
                run();
            }
            return;
        }
        auto known = ordinals.find(link);
        if (known == ordinals.end() || !known->second.retired(h.ordinal)) {
            withdrawn[key] = std::move(reason);
        }
    }

    // What the inbox holds from `peer` on `generation`, for the warning of a stuck set-up.
    std::string unclaimed_from(std::uint64_t generation, int peer) const {
        std::string text;
        for (const auto& [key, data] : inbox) {
            const auto& [link, ordinal, kind, index] = key;
            if (std::get<0>(link) != generation || std::get<2>(link) != peer) {
                continue;
            }
            text += text.empty() ? "" : "; ";
            text += std::string(kind_text(kind)) +
                    (kind == static_cast<std::uint32_t>(Kind::send_window) ||
                             kind == static_cast<std::uint32_t>(Kind::recv_window)
                         ? " #" + std::to_string(index) + " of"
                         : std::string()) +
                    " connection #" + std::to_string(ordinal) + " with send tag " +
                    std::to_string(std::get<4>(link)) + ", recv tag " +
                    std::to_string(std::get<3>(link)) +
                    (std::get<1>(link) == 1 ? " (pmr-internal)" : "");
        }
        return text;
    }
};

/// The post office of this process (never destroyed: MPI may be finalised by then).
PostOffice& post_office();
/// The generation of `comm`, kept in an attribute of the communicator (dup'ed communicators do not
/// inherit it); the post office forgets a generation when its communicator is freed.
std::uint64_t generation_of(MPI_Comm comm);
/// MPI_TAG_UB / 2: pmr's set-up tags on user communicators are this plus the user's tag.
int tag_base();
/// Rank of `rank` of `comm` in MPI_COMM_WORLD, or -1 (e.g. a process from MPI_Comm_spawn).
int world_rank_of(MPI_Comm comm, int rank);
/// Whether the launcher says that every rank of MPI_COMM_WORLD runs on this node (Open MPI,
/// MPICH's Hydra, Slurm); PMR_LAUNCHER_HINTS=0 ignores it.
bool single_node_job();
/// Remembers the calling thread as the one that makes set-up calls.
void note_setup_thread() noexcept;

} // namespace pmr::detail::bootstrap
