// SPDX-License-Identifier: MIT
/// @file target.hpp
/// The peer of a connection: a rank in an MPI communicator and the two tags that pair it.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>

namespace pmr {

class Communicator;

namespace detail {
struct CommunicatorRecord;
struct TargetAccess;
} // namespace detail

/// Names the peer of a Connection.
///
/// Connections pair by tags: `Target(comm, p, a, b)` on rank q pairs with `Target(comm, q, b, a)`
/// on rank p. The same holds for the own rank: two self connections with swapped tags pair with
/// each other, and one with `a == b` pairs with itself (a periodic dimension of size 1). Several
/// connections with identical targets pair in creation order.
///
/// `MPI_PROC_NULL` as rank gives a null target: its connection and windows do nothing.
///
/// Set-up messages: on a communicator wrapped by a pmr::Communicator, pmr sends them on a private
/// duplicate of it, which it keeps as long as anything made from the communicator exists. On any
/// other communicator it sends them on `comm` itself with tags above `MPI_TAG_UB / 2`: then the
/// application should not receive with `MPI_ANY_TAG` on `comm` while pmr objects are being created
/// or first used, and must not free `comm` before their first use. User tags are at most
/// `MPI_TAG_UB / 2` in both cases.
class Target {
public:
    /// @throws ArgumentError if `rank` is neither `MPI_PROC_NULL` nor a rank of `comm`, or a tag is
    ///         negative or above `MPI_TAG_UB / 2`.
    /// @throws BootstrapError if MPI is not initialised or `comm` is invalid.
    Target(MPI_Comm comm, int rank, int send_tag, int recv_tag);
    /// Same, on the communicator wrapped by `comm`.
    Target(const Communicator& comm, int rank, int send_tag, int recv_tag);

    MPI_Comm comm() const noexcept { return comm_; }
    /// Rank of the peer in comm() (or MPI_PROC_NULL).
    int rank() const noexcept { return rank_; }
    /// Rank of this process in comm().
    int own_rank() const noexcept { return own_rank_; }
    int send_tag() const noexcept { return send_tag_; }
    int recv_tag() const noexcept { return recv_tag_; }
    bool is_null() const noexcept { return rank_ == MPI_PROC_NULL; }
    bool is_self() const noexcept { return rank_ == own_rank_; }

    /// @cond internal
    /// pmr's set-up state of comm() when it is wrapped by a pmr::Communicator, else null.
    const std::shared_ptr<detail::CommunicatorRecord>& record() const noexcept { return record_; }
    /// @endcond

private:
    friend struct detail::TargetAccess; // pmr's own targets (not installed: src/base)

    MPI_Comm comm_;
    int rank_;
    int own_rank_ = -1;
    int send_tag_;
    int recv_tag_;
    bool library_ = false;
    std::shared_ptr<detail::CommunicatorRecord> record_;
};

} // namespace pmr
