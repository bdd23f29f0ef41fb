// SPDX-License-Identifier: MIT
// This MPI has no persistent neighbourhood collectives: the variant is not offered.
#include "neighbor_init.hpp"

namespace pmr_bench {

const char* persistent_neighbor_alltoallv_name() {
    return nullptr;
}

int neighbor_alltoallv_init(const void*, const int[], const int[], MPI_Datatype, void*, const int[],
                            const int[], MPI_Datatype, MPI_Comm, MPI_Info, MPI_Request*) {
    return MPI_ERR_OTHER;
}

} // namespace pmr_bench
