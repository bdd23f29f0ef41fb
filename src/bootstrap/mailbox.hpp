// SPDX-License-Identifier: MIT
// Set-up messages between the two sides of a connection, carried by MPI.
//
// Everything a side must tell its peer (who it is, where its windows are) is sent the moment the
// object is constructed, without waiting for anything. The peer picks the message up at its first
// use of the object. Constructors therefore never block, and first uses wait only for the peer's
// constructors -- which is why objects can be created in any order on different ranks.
//
// Messages travel on the user's communicator with tags above MPI_TAG_UB / 2 (user tag + offset)
// and carry a header (connection ordinal, kind, window index), so any number of connections with
// the same target and any number of windows are kept apart without relying on message order.
#pragma once

#include "core/blob.hpp"

#include <mpi.h>

#include <cstdint>
#include <string>

namespace pmr {
class Target;
}

namespace pmr::detail::bootstrap {

enum class Kind : std::uint32_t { hello = 1, send_window = 2, recv_window = 3 };

/// The set-up messages of one connection.
class Channel {
public:
    /// Assigns the connection its ordinal among connections with the same target.
    explicit Channel(const Target& target);

    /// Sends `payload` to the peer; never blocks.
    /// @throws BootstrapError if MPI fails.
    void send(Kind kind, std::uint32_t index, const Blob& payload);

    /// The peer's message of `kind` and `index`, waiting for it with backoff.
    /// @throws Timeout after PMR_TIMEOUT, naming `where`.
    Blob receive(Kind kind, std::uint32_t index, const std::string& where);

private:
    MPI_Comm comm_;
    std::uint64_t generation_; ///< identifies comm_ for as long as it exists
    int peer_;
    int send_tag_;
    int recv_tag_;
    std::uint32_t ordinal_;
};

/// Lets MPI progress this process's set-up messages that are still in flight; free when there are
/// none. The waits of the data path call it on their slow path (every few milliseconds of waiting):
/// a peer may be waiting for such a message (its window's first init) while this process waits
/// for that peer in the data path, and some MPI transports only deliver while the sender calls MPI
/// (e.g. a TCP connection opened lazily). Never throws; errors surface in the set-up calls.
void progress_sends() noexcept;

/// Largest user tag pmr accepts (MPI_TAG_UB / 2).
int max_user_tag();
/// Whether MPI is initialised and not finalised.
bool mpi_active() noexcept;

} // namespace pmr::detail::bootstrap
