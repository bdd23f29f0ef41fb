// SPDX-License-Identifier: MIT
/// @file system_info.hpp
/// The header of every result: enough about machine, MPI and pmr to reproduce the run.
#pragma once

#include <mpi.h>

#include <string>
#include <utility>
#include <vector>

namespace pmr_bench {

using HeaderLines = std::vector<std::pair<std::string, std::string>>;

/// Host names, CPU model and count, ranks and nodes, MPI library and version, the transport
/// settings in the environment (OMPI_MCA_*, UCX_*, PMR_*), date. Collective over `comm` (gathers
/// the host names); the result is meaningful on rank 0.
HeaderLines describe_environment(MPI_Comm comm);

/// Model name of the first CPU in /proc/cpuinfo, or "unknown".
std::string cpu_model();

} // namespace pmr_bench
