// SPDX-License-Identifier: MIT
// Open MPI 4.x: persistent collectives are the MPIX extension "pcollreq" from <mpi-ext.h>.
#include "allreduce_init.hpp"

#include <mpi-ext.h>

namespace pmr_bench {

const char* persistent_allreduce_name() {
    return "MPIX_Allreduce_init (Open MPI extension)";
}

int allreduce_init(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op,
                   MPI_Comm comm, MPI_Info info, MPI_Request* request) {
    return MPIX_Allreduce_init(send, recv, count, type, op, comm, info, request);
}

} // namespace pmr_bench
