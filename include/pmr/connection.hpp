// SPDX-License-Identifier: MIT
/// @file connection.hpp
/// A persistent connection to one peer.
#pragma once

#include <pmr/provider.hpp>
#include <pmr/target.hpp>

#include <cstddef>
#include <memory>
#include <optional>
#include <string>

namespace pmr {

namespace detail {
class ConnectionState;
} // namespace detail

/// A persistent connection to the peer named by a Target. Windows are created on a connection.
///
/// Construction never blocks: it sends this side's description to the peer and returns. The
/// handshake completes when the connection or one of its windows is first used (or on establish()),
/// which waits only until the peer has *constructed* the matching connection. Connections and
/// windows can therefore be created in any order on different ranks.
///
/// The transport is chosen once, before any of its resources exist: `null` for MPI_PROC_NULL,
/// `self` for the own rank, `shm` for a peer on the same node, a network provider otherwise. Where
/// the peer's node is known at construction (targets of a pmr::Communicator, or a peer this process
/// has met before), that happens in the constructor; otherwise at the handshake. The environment
/// variable `PMR_PROVIDER=<name>` forces the provider of every inter-process connection.
///
/// A default-constructed Connection is empty (like a moved-from one): it can be assigned to, and
/// every other use throws UsageError. That lets connections live in arrays.
///
/// Threading: a connection and its windows are used by one thread at a time; different connections
/// may be used from different threads. The data path never calls MPI, so any MPI thread level
/// works; construction and the first use call MPI and need `MPI_THREAD_SERIALIZED` if made from
/// several threads.
class Connection {
public:
    /// An empty connection, to be assigned to.
    Connection() noexcept;
    /// @throws ArgumentError, BootstrapError (see Target).
    explicit Connection(const Target& target);
    /// Forces `provider` for this connection; the peer must force the same one.
    /// @throws ArgumentError if `provider` is not compiled in or cannot serve this target.
    Connection(const Target& target, Provider provider);

    Connection(const Connection&) = delete;
    Connection& operator=(const Connection&) = delete;
    Connection(Connection&&) noexcept;
    Connection& operator=(Connection&&) noexcept;
    ~Connection();

    /// Whether this object holds a connection (false when default-constructed or moved from).
    explicit operator bool() const noexcept { return state_ != nullptr; }

    /// Completes the handshake now; blocks until the peer has constructed its side.
    /// @throws Timeout, PeerLost, ProviderError, ArgumentError (peer disagrees on a forced
    /// provider), UsageError (empty connection).
    void establish();

    /// Whether the handshake has completed (by establish() or a first use). Never blocks.
    /// @throws UsageError for an empty connection.
    bool established() const;
    /// The provider if it is chosen already, else nothing; never blocks. It is chosen in the
    /// constructor where the peer's node is known (see above), else at the handshake.
    /// @throws UsageError for an empty connection.
    std::optional<Provider> chosen_provider() const;

    /// Provider chosen for this connection. **Blocks**: completes the handshake first, i.e. waits
    /// until the peer has constructed its side (like establish()). chosen_provider() does not.
    /// @throws as establish().
    Provider provider();
    /// Number of rails (independent network paths) of this connection; 1 for local providers.
    /// **Blocks**: completes the handshake first (like establish()), since the rails are agreed
    /// with the peer. @throws as establish().
    std::size_t rails();
    /// Description of rail `index` (< rails()). **Blocks** like rails().
    /// @throws ArgumentError for a bad index; as establish().
    RailInfo rail(std::size_t index);

    /// @throws UsageError for an empty connection.
    const Target& target() const;
    /// Peer rank in target().comm(). @throws UsageError for an empty connection.
    int peer() const { return target().rank(); }
    /// "rank 0 -> peer 1 (send tag 1, recv tag 0, provider shm)", for messages and logs.
    std::string describe() const;

    /// @cond internal
    const std::shared_ptr<detail::ConnectionState>& state() const noexcept { return state_; }
    /// @endcond

private:
    detail::ConnectionState& checked() const;
    std::shared_ptr<detail::ConnectionState> state_;
};

} // namespace pmr
