! SPDX-License-Identifier: MIT
! An ordinary Fortran MPI program (`use mpi`): a periodic 1D halo exchange with persistent
! requests and a global sum, every value checked. Under pmr-run its halo and sums are carried by
! pmr through the interposer's Fortran entry points (Open MPI's Fortran bindings call PMPI_*).
program halo_ring
  use mpi
  implicit none
  integer, parameter :: n = 8, iterations = 100
  integer :: rank, size, up, down, ierr, it, i, errors, total
  integer :: requests(4), statuses(MPI_STATUS_SIZE, 4), status(MPI_STATUS_SIZE)
  integer :: message, request, count
  logical :: flag
  double precision :: sup(n), sdown(n), rup(n), rdown(n), x

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, size, ierr)
  up = mod(rank + 1, size)
  down = mod(rank + size - 1, size)
  call MPI_Recv_init(rdown, n, MPI_DOUBLE_PRECISION, down, 1, MPI_COMM_WORLD, requests(1), ierr)
  call MPI_Recv_init(rup, n, MPI_DOUBLE_PRECISION, up, 2, MPI_COMM_WORLD, requests(2), ierr)
  call MPI_Send_init(sup, n, MPI_DOUBLE_PRECISION, up, 1, MPI_COMM_WORLD, requests(3), ierr)
  call MPI_Send_init(sdown, n, MPI_DOUBLE_PRECISION, down, 2, MPI_COMM_WORLD, requests(4), ierr)
  errors = 0
  do it = 1, iterations
    do i = 1, n
      sup(i) = 1000d0 * rank + it + i
      sdown(i) = -1000d0 * rank - it + i
    end do
    call MPI_Startall(4, requests, ierr)
    call MPI_Waitall(4, requests, statuses, ierr)
    do i = 1, n
      if (rdown(i) /= 1000d0 * down + it + i) errors = errors + 1
      if (rup(i) /= -1000d0 * up - it + i) errors = errors + 1
    end do
    if (statuses(MPI_SOURCE, 1) /= down .or. statuses(MPI_TAG, 2) /= 2) errors = errors + 1
    x = rank + it
    call MPI_Allreduce(MPI_IN_PLACE, x, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
    if (x /= size * (size - 1) / 2d0 + size * it) errors = errors + 1
  end do
  do i = 1, 4
    call MPI_Request_free(requests(i), ierr)
  end do
  ! Matched probes on the (now carried) stream from `down` with tag 1: MPI_Mprobe + MPI_Mrecv,
  ! then MPI_Improbe + MPI_Imrecv, each message checked.
  do i = 1, n
    sup(i) = 7d0 * rank + i
    sdown(i) = 9d0 * rank + i
  end do
  call MPI_Send(sup, n, MPI_DOUBLE_PRECISION, up, 1, MPI_COMM_WORLD, ierr)
  call MPI_Send(sdown, n - 1, MPI_DOUBLE_PRECISION, up, 1, MPI_COMM_WORLD, ierr)
  call MPI_Mprobe(down, 1, MPI_COMM_WORLD, message, status, ierr)
  call MPI_Get_count(status, MPI_DOUBLE_PRECISION, count, ierr)
  if (count /= n) errors = errors + 1
  call MPI_Mrecv(rdown, n, MPI_DOUBLE_PRECISION, message, status, ierr)
  if (rdown(n) /= 7d0 * down + n .or. message /= MPI_MESSAGE_NULL) errors = errors + 1
  flag = .false.
  do while (.not. flag)
    call MPI_Improbe(down, MPI_ANY_TAG, MPI_COMM_WORLD, flag, message, status, ierr)
  end do
  call MPI_Imrecv(rdown, n, MPI_DOUBLE_PRECISION, message, request, ierr)
  call MPI_Wait(request, status, ierr)
  call MPI_Get_count(status, MPI_DOUBLE_PRECISION, count, ierr)
  if (count /= n - 1 .or. rdown(1) /= 9d0 * down + 1 .or. status(MPI_TAG) /= 1) errors = errors + 1
  call MPI_Allreduce(errors, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (rank == 0) print '(a,i0,a,i0,a)', 'halo_ring (Fortran): ', size, ' ranks, ', total, ' errors'
  call MPI_Finalize(ierr)
  if (total /= 0) stop 1
end program halo_ring
