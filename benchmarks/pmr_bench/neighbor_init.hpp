// SPDX-License-Identifier: MIT
/// @file neighbor_init.hpp
/// Persistent MPI_Neighbor_alltoallv, where the MPI library has one: MPI 4's
/// MPI_Neighbor_alltoallv_init or Open MPI's MPIX_Neighbor_alltoallv_init extension. CMake
/// compiles exactly one of neighbor_init_mpi4.cpp, neighbor_init_mpix.cpp or
/// neighbor_init_none.cpp, whichever the MPI at hand supports.
#pragma once

#include <mpi.h>

namespace pmr_bench {

/// Name of the call, or nullptr if this MPI has no persistent neighbourhood collectives.
const char* persistent_neighbor_alltoallv_name();

/// Same arguments as MPI_Neighbor_alltoallv plus info and request. Only call it when
/// persistent_neighbor_alltoallv_name() is not null.
int neighbor_alltoallv_init(const void* send, const int send_counts[], const int send_offsets[],
                            MPI_Datatype send_type, void* recv, const int recv_counts[],
                            const int recv_offsets[], MPI_Datatype recv_type, MPI_Comm comm,
                            MPI_Info info, MPI_Request* request);

} // namespace pmr_bench
