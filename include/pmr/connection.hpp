// SPDX-License-Identifier: MIT
/// @file connection.hpp
/// A persistent connection to one peer.
#pragma once

#include <pmr/provider.hpp>
#include <pmr/target.hpp>

#include <cstddef>
#include <memory>
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
/// The transport is chosen once, when the handshake completes: `null` for MPI_PROC_NULL, `self` for
/// the own rank, `shm` for a peer on the same node, a network provider otherwise. The environment
/// variable `PMR_PROVIDER=<name>` forces the provider of every inter-process connection.
///
/// Threading: a connection and its windows are used by one thread at a time; different connections
/// may be used from different threads. The data path never calls MPI, so any MPI thread level
/// works; construction and the first use call MPI and need `MPI_THREAD_SERIALIZED` if made from
/// several threads.
class Connection {
public:
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

    /// Completes the handshake now; blocks until the peer has constructed its side.
    /// @throws Timeout, PeerLost, ProviderError, ArgumentError (peer disagrees on a forced
    /// provider).
    void establish();

    /// Provider chosen for this connection (completes the handshake if needed).
    Provider provider();
    /// Number of rails (independent network paths) of this connection; 1 for local providers.
    std::size_t rails();

    const Target& target() const noexcept;
    /// Peer rank in target().comm().
    int peer() const noexcept { return target().rank(); }
    /// "rank 0 -> peer 1 (send tag 1, recv tag 0, provider shm)", for messages and logs.
    std::string describe() const;

    /// @cond internal
    const std::shared_ptr<detail::ConnectionState>& state() const noexcept { return state_; }
    /// @endcond

private:
    const detail::ConnectionState& checked() const;
    std::shared_ptr<detail::ConnectionState> state_;
};

} // namespace pmr
