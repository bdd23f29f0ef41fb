! SPDX-License-Identifier: MIT
! A Fortran program against an installed pmr: `use pmr`, one window to the own rank.
program consumer
    use mpi_f08
    use pmr
    implicit none
    type(pmr_connection) :: c
    type(pmr_send_window) :: s
    type(pmr_recv_window) :: r
    integer, target :: value(1), received(1)
    integer :: rank, ierr
    call MPI_Init()
    call MPI_Comm_rank(MPI_COMM_WORLD, rank)
    value = 42
    received = 0
    call pmr_connection_create(MPI_COMM_WORLD, rank, 0, 0, c)
    call pmr_send_window_create(c, value, 4, s)
    call pmr_recv_window_create(c, received, 4, r)
    call pmr_recv_window_init(r)
    call pmr_send_window_init(s)
    call pmr_send_window_post(s, 4)
    call pmr_recv_window_post(r)
    call pmr_send_window_wait(s)
    call pmr_recv_window_wait(r, ierr)
    print '(a, i0)', 'Fortran consumer: received ', received(1)
    call pmr_send_window_destroy(s)
    call pmr_recv_window_destroy(r)
    call pmr_connection_destroy(c)
    call MPI_Finalize()
    if (ierr /= PMR_SUCCESS .or. received(1) /= 42) error stop 1
end program
