// SPDX-License-Identifier: MIT
// Set-up messages between the two sides of a connection, carried by MPI (the post office,
// post_office.hpp, keeps them for the process).
//
// Everything a side must tell its peer (who it is, where its windows are) is sent the moment the
// object is constructed, without waiting for anything. The peer picks the message up at its first
// use of the object. Constructors therefore never block, and first uses wait only for the peer's
// constructors -- which is why objects can be created in any order on different ranks.
//
// Messages travel on a private duplicate of a communicator wrapped by pmr::Communicator, or on the
// user's communicator with tags above MPI_TAG_UB / 2 (user tag + offset). Each carries a header
// (library or application space, connection ordinal, kind, window index, the sender's receive
// tag), so any number of connections with the same target and any number of windows are kept
// apart without relying on message order. Every header is checked: a message on pmr's tags that
// is not pmr's, a duplicate, or one for a connection that no longer exists never passes silently.
#pragma once

#include "bootstrap/communicator_record.hpp"

#include "base/blob.hpp"

#include <mpi.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <sys/types.h>

namespace pmr {
class Target;
}

namespace pmr::detail::bootstrap {

enum class Kind : std::uint32_t {
    hello = 1,          ///< a connection: who this side is, which provider it chose
    send_window = 2,    ///< a send window's description
    recv_window = 3,    ///< a receive window's description
    provider_hello = 4, ///< the provider's hello, when the provider was chosen at the handshake
    withdrawn = 5,      ///< a window destroyed before it read the peer's description
};

/// Why a side withdrew a window, told to the peer with the withdrawal so that the peer's matching
/// window names it in its error.
enum class WithdrawCause : std::uint32_t {
    unused = 0,         ///< destroyed without having been used
    resource_limit = 1, ///< its constructor reached a limit (a ResourceError)
    failed = 2,         ///< its constructor failed otherwise
};

struct WithdrawReason {
    WithdrawCause cause = WithdrawCause::unused;
    std::string message; ///< the constructor's error (what()), for the failures
};

/// How a receive() waits: where (for messages), the peer process to watch if on this node, and
/// what else to progress while waiting.
struct WaitContext {
    const std::string* where = nullptr;
    pid_t watch = 0; ///< > 0: a process on this node whose exit ends the wait with PeerLost
    /// Called on every fruitless poll: the core answers the hellos of its other connections, so
    /// that a peer waiting for them (in any order of first uses) is never stuck behind this wait.
    void (*progress)() noexcept = nullptr;
};

/// The set-up messages of one connection.
class SetupLink {
public:
    /// Assigns the connection its ordinal among connections with the same target.
    /// @throws UsageError if the target's communicator has been freed.
    explicit SetupLink(const Target& target);
    SetupLink(const SetupLink&) = delete;
    SetupLink& operator=(const SetupLink&) = delete;
    /// Forgets this connection's messages: those that arrived and those still to come.
    ~SetupLink();

    /// Sends `payload` to the peer; never blocks.
    /// @throws BootstrapError if MPI fails, UsageError if the communicator was freed.
    void send(Kind kind, std::uint32_t index, const Blob& payload);

    /// The peer's message of `kind` and `index`, waiting for it with backoff. After PMR_WARN_AFTER
    /// seconds (default 10) it warns once on stderr, naming this side and what the peer has
    /// created so far.
    /// @throws Timeout after PMR_TIMEOUT, PeerLost if the watched process exits, BootstrapError
    ///         for a malformed message or a failing MPI, what try_receive() throws for a window
    ///         the peer withdrew.
    Blob receive(Kind kind, std::uint32_t index, const WaitContext& context);

    /// The message if it has arrived; never waits.
    /// @throws UsageError if the peer withdrew that window (destroyed it unused) without having
    ///         sent its description; ResourceError if the peer's window failed at a limit and
    ///         ProviderError if it failed otherwise (raise_if_withdrawn());
    ///         `where` (may be null: then the connection) names this side's object in them.
    std::optional<Blob> try_receive(Kind kind, std::uint32_t index,
                                    const std::string* where = nullptr);
    /// Raises the error of the peer's window `index` of `kind` if the peer withdrew it (also
    /// after sending its description): UsageError if it was destroyed unused, ResourceError
    /// (naming the peer's limit) or ProviderError if its constructor failed. `where` names this
    /// side's window.
    void raise_if_withdrawn(Kind kind, std::uint32_t index, const std::string& where);

    /// Tells the peer that this side's window `index` of kind `own` (send_window or recv_window)
    /// is gone without having read the peer's description, so that the peer's matching window
    /// gets a clear UsageError instead of waiting, and the peer can free memory it kept for it.
    /// `on_peer_withdrawn` (may be empty) runs once the peer's matching window is known to be
    /// gone the same way -- at once if it is already, later from a set-up call of this process
    /// (even after this link is destroyed), or never if the peer never withdraws it. Only from
    /// the thread that makes set-up calls and while MPI runs; otherwise nothing is sent and
    /// `on_peer_withdrawn` never runs. `reason` travels with the withdrawal: a window whose
    /// constructor failed withdraws its place with the error, so that the peer's matching window
    /// fails at once with it instead of waiting for PMR_TIMEOUT. Never throws.
    void withdraw(Kind own, std::uint32_t index, std::function<void()> on_peer_withdrawn,
                  const WithdrawReason& reason = {}) noexcept;

    /// What pmr knows of the peer without asking it: the communicator's node map, an earlier
    /// handshake with the same process (on any communicator), or the launcher's word that every
    /// rank of MPI_COMM_WORLD runs on this node (then the pid is 0: unknown).
    std::optional<PeerRecord> known_peer() const;
    /// Remembers what the peer's hello said, for later connections to the same process.
    void learn(const PeerRecord& peer) const;

private:
    void check_alive() const;
    [[noreturn]] void raise_withdrawn(Kind kind, std::uint32_t index, const WithdrawReason& reason,
                                      const std::string& where) const;

    MPI_Comm comm_;            ///< where set-up messages travel
    std::uint64_t generation_; ///< identifies comm_ for as long as it exists
    std::shared_ptr<CommunicatorRecord> record_;
    int peer_;
    int own_rank_;
    int send_tag_; ///< the application's tags
    int recv_tag_;
    std::uint32_t space_;
    std::uint32_t ordinal_;
};

/// Set-up messages sent and not yet known to be complete (the post office's count, readable
/// without its lock).
extern std::atomic<std::size_t> sends_in_flight;
/// progress_sends() once some are in flight.
void progress_sends_in_flight() noexcept;

/// Lets MPI progress this process's set-up messages that are still in flight; free when there are
/// none. The waits of the data path call it on their slow path (every few milliseconds of waiting):
/// a peer may be waiting for such a message (its window's first init) while this process waits
/// for that peer in the data path, and some MPI transports only deliver while the sender calls MPI
/// (e.g. a TCP connection opened lazily). It calls MPI only on the thread that last made set-up
/// calls, and only while its set-up messages are in flight; other threads never call MPI from the
/// data path. Never throws; errors surface in the set-up calls.
inline void progress_sends() noexcept {
    // Inline: every completion of the data path passes here, nearly always with nothing in flight.
    if (sends_in_flight.load(std::memory_order_relaxed) != 0) {
        progress_sends_in_flight();
    }
}

} // namespace pmr::detail::bootstrap
