// SPDX-License-Identifier: MIT
// MPI 4: MPI_Allreduce_init.
#include "allreduce_init.hpp"

namespace pmr_bench {

const char* persistent_allreduce_name() {
    return "MPI_Allreduce_init (MPI 4)";
}

int allreduce_init(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op,
                   MPI_Comm comm, MPI_Info info, MPI_Request* request) {
    return MPI_Allreduce_init(send, recv, count, type, op, comm, info, request);
}

} // namespace pmr_bench
