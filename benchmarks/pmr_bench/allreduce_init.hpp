// SPDX-License-Identifier: MIT
/// @file allreduce_init.hpp
/// Persistent MPI_Allreduce, where the MPI library has one: MPI 4's MPI_Allreduce_init or Open
/// MPI's MPIX_Allreduce_init extension (<mpi-ext.h>, Open MPI 4.x). CMake compiles exactly one of
/// allreduce_init_mpi4.cpp, allreduce_init_mpix.cpp or allreduce_init_none.cpp.
#pragma once

#include <mpi.h>

namespace pmr_bench {

/// Name of the call, or nullptr if this MPI has no persistent allreduce.
const char* persistent_allreduce_name();

/// Same arguments as MPI_Allreduce plus info and request. Only call it when
/// persistent_allreduce_name() is not null.
int allreduce_init(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op,
                   MPI_Comm comm, MPI_Info info, MPI_Request* request);

} // namespace pmr_bench
