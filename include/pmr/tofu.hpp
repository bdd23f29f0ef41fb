// SPDX-License-Identifier: MIT
/// @file tofu.hpp
/// What applications written for the Tofu interconnect (K computer, Fugaku) use of pmr's tofu
/// provider: the virtual 3D torus. Available in every build, with or without the tofu provider,
/// so that such an application builds and runs unchanged elsewhere.
#pragma once

#include <pmr/communicator.hpp>

#include <mpi.h>

#include <array>

namespace pmr::tofu {

/// A periodic 3D grid of `dims` (product: the size of `comm`) laid out as a virtual 3D torus of
/// the Tofu interconnect, as the K computer presents its 6D mesh/torus: the same ranks,
/// coordinates and neighbours as `Communicator(comm, dims, {true, true, true})` (no reordering),
/// and on the tofu provider each rank's emulated node is placed so that virtual neighbours are
/// physical neighbours (1 hop). Virtual axis 0 runs through X and a, axis 1 through Y and b, axis
/// 2 through Z and c, in the shape `PMR_TOFU_SHAPE` (default: the smallest shape that holds the
/// torus); no rank is placed on a node of `PMR_TOFU_FAULTY` (the torus slides past them, see
/// docs/providers.md "Tofu topology"). Other providers ignore the placement. Collective over
/// `comm`; call it before this process's first tofu connection (the placement of a node is fixed
/// by its first connection).
/// @throws BootstrapError if MPI is not initialised.
/// @throws ArgumentError if an extent is below 1, the grid does not match the size, the torus
/// does not fit in PMR_TOFU_SHAPE or no placement avoids the faulty nodes.
/// @throws UsageError if this process's tofu node was placed already elsewhere.
Communicator virtual_torus(MPI_Comm comm, const std::array<int, 3>& dims);

} // namespace pmr::tofu
