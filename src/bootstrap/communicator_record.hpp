// SPDX-License-Identifier: MIT
// What pmr knows of the processes of a communicator: PeerRecord (a process's pid and node) and
// CommunicatorRecord (the set-up state of a communicator wrapped by pmr::Communicator).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace pmr::detail {

/// What is known of a peer process: its pid and its node (see base/node.hpp).
struct PeerRecord {
    std::int32_t pid = 0;
    std::uint64_t node_key = 0;
    std::string node; ///< empty when only the key is known (node maps exchange keys only)
};

/// pmr's set-up state of a communicator wrapped by pmr::Communicator, shared by the Communicator
/// and everything made from it, and released with the last of them.
struct CommunicatorRecord {
    MPI_Comm comm = MPI_COMM_NULL;  ///< the communicator the application sees
    bool owns_comm = false;         ///< a Cartesian communicator pmr made
    MPI_Comm setup = MPI_COMM_NULL; ///< private duplicate, for set-up messages only
    std::vector<PeerRecord> peers;  ///< by rank: who runs where

    /// Duplicates `comm` and learns the node of every rank. Collective over `comm`.
    /// @throws BootstrapError if MPI fails.
    static std::shared_ptr<CommunicatorRecord> create(MPI_Comm comm, bool owns_comm);

    CommunicatorRecord() = default;
    CommunicatorRecord(const CommunicatorRecord&) = delete;
    CommunicatorRecord& operator=(const CommunicatorRecord&) = delete;
    /// Frees the communicators pmr made, if MPI is still active.
    ~CommunicatorRecord();
};

} // namespace pmr::detail
