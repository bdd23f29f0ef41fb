! SPDX-License-Identifier: MIT
! Without `ierr`, an error ends the program: the message on the error unit, a non-zero exit code.
! Here: a post before init. The test passes only if the program fails with that message.
program test_fortran_fatal
    use mpi_f08
    use pmr
    implicit none
    type(pmr_connection) :: c
    type(pmr_send_window) :: s
    integer :: rank
    real(8), target :: buffer(4)
    call MPI_Init()
    call MPI_Comm_rank(MPI_COMM_WORLD, rank)
    call pmr_connection_create(MPI_COMM_WORLD, rank, 0, 0, c)
    call pmr_send_window_create(c, buffer, 32, s)
    call pmr_send_window_post(s, 32) ! no init: ends the program here
    print *, 'not reached'
    call MPI_Finalize()
end program
