/* SPDX-License-Identifier: MIT */
/* The C side of the Fortran module: Fortran communicator handles (the integers of `use mpi`, the
 * MPI_VAL of mpi_f08's type(MPI_Comm)) become C communicators through MPI_Comm_f2c, the one
 * portable way (a C MPI_Comm is a pointer in Open MPI and an int in MPICH). */
#include <pmr/pmr.h>

#include <mpi.h>

int pmr_fortran_connection_create(MPI_Fint comm, int peer, int send_tag, int recv_tag,
                                  pmr_connection* out);
int pmr_fortran_communicator_create(MPI_Fint comm, int ndims, const int* dims, const int* periods,
                                    int reorder, pmr_communicator* out);
int pmr_fortran_communicator_comm(pmr_communicator c, MPI_Fint* comm);

/* MPI_Comm_f2c may only be called while MPI is initialised. Outside that time the C interface is
 * handed MPI_COMM_WORLD, which it rejects with PMR_ERR_BOOTSTRAP before using the handle. */
static MPI_Comm from_fortran(MPI_Fint comm) {
    int initialized = 0;
    int finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    return initialized && !finalized ? MPI_Comm_f2c(comm) : MPI_COMM_WORLD;
}

int pmr_fortran_connection_create(MPI_Fint comm, int peer, int send_tag, int recv_tag,
                                  pmr_connection* out) {
    return pmr_connection_create(from_fortran(comm), peer, send_tag, recv_tag, out);
}

int pmr_fortran_communicator_create(MPI_Fint comm, int ndims, const int* dims, const int* periods,
                                    int reorder, pmr_communicator* out) {
    return pmr_communicator_create(from_fortran(comm), ndims, dims, periods, reorder, out);
}

int pmr_fortran_communicator_comm(pmr_communicator c, MPI_Fint* comm) {
    MPI_Comm result = MPI_COMM_NULL;
    const int rc = pmr_communicator_comm(c, &result);
    if (rc == PMR_SUCCESS && comm != NULL) {
        *comm = MPI_Comm_c2f(result);
    }
    return rc;
}
