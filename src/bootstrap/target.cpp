// SPDX-License-Identifier: MIT
#include "base/environment.hpp"
#include "base/error.hpp"
#include "base/library_target.hpp"
#include "bootstrap/mpi_process.hpp"
#include "bootstrap/setup_link.hpp"

#include <pmr/communicator.hpp>
#include <pmr/target.hpp>

#include <string>

namespace pmr {

Target::Target(MPI_Comm comm, int rank, int send_tag, int recv_tag)
    : comm_(comm), rank_(rank), send_tag_(send_tag), recv_tag_(recv_tag) {
    const std::string where = "Target(rank " + std::to_string(rank) + ", send tag " +
                              std::to_string(send_tag) + ", recv tag " + std::to_string(recv_tag) +
                              ")";
    detail::bootstrap::require_mpi(where);
    if (comm == MPI_COMM_NULL) {
        detail::raise<ArgumentError>("the communicator is MPI_COMM_NULL", where);
    }
    int size = 0;
    MPI_Comm_size(comm, &size);
    MPI_Comm_rank(comm, &own_rank_);
    if (rank != MPI_PROC_NULL && (rank < 0 || rank >= size)) {
        detail::raise<ArgumentError>("rank " + std::to_string(rank) +
                                         " is not in the communicator (size " +
                                         std::to_string(size) + ")",
                                     where, "Use a rank in [0, size) or MPI_PROC_NULL.");
    }
    const int max_tag = detail::bootstrap::max_user_tag();
    for (int tag : {send_tag, recv_tag}) {
        if (tag < 0 || tag > max_tag) {
            detail::raise<ArgumentError>("tag " + std::to_string(tag) + " is out of range", where,
                                         "Tags must be in [0, " + std::to_string(max_tag) +
                                             "] (pmr uses the upper half of MPI_TAG_UB).");
        }
    }
}

Target::Target(const Communicator& comm, int rank, int send_tag, int recv_tag)
    : Target(comm.get(), rank, send_tag, recv_tag) {
    record_ = comm.record();
}

Target detail::TargetAccess::library(const Communicator& comm, int rank, int send_tag,
                                     int recv_tag) {
    Target target(comm, rank, send_tag, recv_tag);
    target.library_ = true;
    return target;
}

} // namespace pmr
