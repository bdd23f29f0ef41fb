// SPDX-License-Identifier: MIT
// pmr::tofu::virtual_torus (pmr/tofu.hpp): a periodic 3D grid whose ranks the tofu provider places
// on the nodes of a virtual torus. Defined here, above the providers, so that the generic layers
// below (bootstrap's Communicator) know nothing of Tofu; built with or without the tofu provider.
#include "base/error.hpp"
#include "bootstrap/mpi_process.hpp"
#include "providers/tofu/topology.hpp"

#include <pmr/communicator.hpp>
#include <pmr/tofu.hpp>

#include <string>

namespace pmr {

Communicator tofu::virtual_torus(MPI_Comm comm, const std::array<int, 3>& dims) {
    namespace topology = detail::tofu_topology;
    const char* const where = "tofu::virtual_torus";
    detail::bootstrap::require_mpi(where);
    for (int d : dims) {
        if (d < 1) {
            detail::raise<ArgumentError>("a virtual torus needs extents of at least 1", where,
                                         "Give three positive extents whose product is the "
                                         "number of ranks.");
        }
    }
    topology::Shape shape;
    if (!topology::shape_from_environment(shape)) {
        shape = topology::shape_for(dims);
    }
    const auto mapping =
        topology::embed(shape, dims, topology::faulty_from_environment(shape), false);
    Communicator grid(comm, {dims[0], dims[1], dims[2]}, {true, true, true}, false);
    topology::Placement wanted;
    wanted.shape = shape;
    wanted.node = mapping.at({grid.coordinate(0), grid.coordinate(1), grid.coordinate(2)});
    wanted.origin = "virtual torus " + std::to_string(dims[0]) + " x " + std::to_string(dims[1]) +
                    " x " + std::to_string(dims[2]);
    const auto in_force = topology::fix_placement(wanted);
    if (in_force.shape != wanted.shape || in_force.node != wanted.node) {
        detail::raise<UsageError>(
            "this process's emulated Tofu node was placed already at " +
                topology::format(in_force.node) + " of shape " + topology::format(in_force.shape) +
                " (" + in_force.origin + "), not at " + topology::format(wanted.node) +
                " of shape " + topology::format(shape) + " as the virtual torus needs",
            std::string(where) + " rank " + std::to_string(grid.rank()),
            "Create the virtual-torus communicator before the first tofu connection, and only "
            "one per process.");
    }
    return grid;
}

Communicator Communicator::virtual_torus(MPI_Comm comm, const std::array<int, 3>& dims) {
    return tofu::virtual_torus(comm, dims);
}

} // namespace pmr
