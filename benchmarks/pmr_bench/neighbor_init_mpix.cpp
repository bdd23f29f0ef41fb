// SPDX-License-Identifier: MIT
// Open MPI 4.x: persistent collectives are the MPIX extension "pcollreq" from <mpi-ext.h>.
#include "neighbor_init.hpp"

#include <mpi-ext.h>

namespace pmr_bench {

const char* persistent_neighbor_alltoallv_name() {
    return "MPIX_Neighbor_alltoallv_init (Open MPI extension)";
}

int neighbor_alltoallv_init(const void* send, const int send_counts[], const int send_offsets[],
                            MPI_Datatype send_type, void* recv, const int recv_counts[],
                            const int recv_offsets[], MPI_Datatype recv_type, MPI_Comm comm,
                            MPI_Info info, MPI_Request* request) {
    return MPIX_Neighbor_alltoallv_init(send, send_counts, send_offsets, send_type, recv,
                                        recv_counts, recv_offsets, recv_type, comm, info, request);
}

} // namespace pmr_bench
