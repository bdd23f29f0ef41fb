// SPDX-License-Identifier: MIT
// MPI 4.0 and later: persistent neighbourhood collectives are standard.
#include "neighbor_init.hpp"

namespace pmr_bench {

const char* persistent_neighbor_alltoallv_name() {
    return "MPI_Neighbor_alltoallv_init";
}

int neighbor_alltoallv_init(const void* send, const int send_counts[], const int send_offsets[],
                            MPI_Datatype send_type, void* recv, const int recv_counts[],
                            const int recv_offsets[], MPI_Datatype recv_type, MPI_Comm comm,
                            MPI_Info info, MPI_Request* request) {
    return MPI_Neighbor_alltoallv_init(send, send_counts, send_offsets, send_type, recv,
                                       recv_counts, recv_offsets, recv_type, comm, info, request);
}

} // namespace pmr_bench
