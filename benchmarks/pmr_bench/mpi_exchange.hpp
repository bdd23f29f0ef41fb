// SPDX-License-Identifier: MIT
/// @file mpi_exchange.hpp
/// The MPI baselines of a halo exchange, for every benchmark that exchanges halos on a HaloGrid.
#pragma once

#include "benchmark.hpp"
#include "halo.hpp"

#include <memory>
#include <vector>

namespace pmr_bench {

/// The MPI variants that `context` asks for, in output order: mpi-persistent
/// (MPI_Send_init/MPI_Recv_init, MPI_Startall), mpi-isend, mpi-neighbor
/// (MPI_Neighbor_alltoallv), mpi-ineighbor and, where this MPI has it, mpi-neighbor-init.
/// Collective over the grid's communicator.
std::vector<std::unique_ptr<Variant>> mpi_exchange_variants(const HaloGrid& grid, bool buffered,
                                                            const Context& context);

} // namespace pmr_bench
