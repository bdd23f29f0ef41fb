! SPDX-License-Identifier: MIT
!> pmr-halo3d-fortran: a 3D heat solver (Jacobi iteration, 7-point stencil) in Fortran through the
!> `pmr` module. The same solve runs twice, with the halos of the 3D array exchanged by MPI
!> (MPI_Sendrecv) and by pmr windows; the two final fields must be equal bit for bit (exit code 1
!> otherwise).
!>
!> Every rank owns u(0:nx+1, 0:ny+1, 0:nz+1), one ghost layer around nx x ny x nz cells. In
!> Fortran's column-major order a slab u(:, :, k) is contiguous, so the two z faces are windows
!> straight over the array (no copy; the slab's rim of x and y ghosts travels along, which the
!> 7-point stencil never reads). The x and y faces are strided: they are packed into contiguous
!> arrays that are the windows. At a non-periodic border the neighbour is MPI_PROC_NULL and the
!> ghosts keep their initial values (a fixed boundary).
!>
!>     mpirun -np 8 pmr-halo3d-fortran --size 32 --iterations 100 --periodic 1
program halo3d
    use mpi_f08
    use pmr
    use, intrinsic :: iso_fortran_env, only: error_unit, int64
    use, intrinsic :: iso_c_binding, only: c_size_t
    implicit none

    type :: Faces
        real(8), allocatable :: send(:, :), recv(:, :)
    end type

    integer :: n(3), nx, ny, nz, iterations, periodic, rank, it
    integer :: extent(3), coords(3), neighbor(6)
    type(pmr_communicator) :: cart
    type(MPI_Comm) :: comm
    real(8), allocatable, target :: reference(:, :, :), field(:, :, :), next(:, :, :)
    type(Faces), target :: buffers(4) ! the x and y faces: -x, +x, -y, +y
    type(pmr_connection) :: connections(6)
    type(pmr_send_window) :: sends(6)
    type(pmr_recv_window) :: recvs(6)
    real(8) :: seconds(2), slowest(2), checksum, total
    logical :: equal, all_equal
    character(len=16) :: provider

    call MPI_Init()
    call MPI_Comm_rank(MPI_COMM_WORLD, rank)
    call parse_options(n, iterations, periodic)
    nx = n(1); ny = n(2); nz = n(3)

    ! The Cartesian grid; every pmr call without `ierr` ends the program on an error, with its
    ! message.
    call pmr_communicator_create(MPI_COMM_WORLD, [0, 0, 0], [periodic == 1, periodic == 1, &
                                 periodic == 1], .false., cart)
    call pmr_communicator_comm(cart, comm)
    call pmr_communicator_grid(cart, dims=extent, coords=coords)
    call neighbours(cart, neighbor)

    allocate (reference(0:nx + 1, 0:ny + 1, 0:nz + 1), field(0:nx + 1, 0:ny + 1, 0:nz + 1), &
              next(nx, ny, nz))
    allocate (buffers(1)%send(ny, nz), buffers(1)%recv(ny, nz), &
              buffers(2)%send(ny, nz), buffers(2)%recv(ny, nz), &
              buffers(3)%send(nx, nz), buffers(3)%recv(nx, nz), &
              buffers(4)%send(nx, nz), buffers(4)%recv(nx, nz))

    ! The MPI reference.
    call initialize(reference)
    call MPI_Barrier(comm)
    seconds(1) = MPI_Wtime()
    do it = 1, iterations
        call mpi_exchange(reference)
        call update(reference)
    end do
    seconds(1) = MPI_Wtime() - seconds(1)

    ! The same solve with pmr.
    call initialize(field)
    call create_windows()
    call pmr_exchange(field) ! the first use completes the set-up: not timed
    call initialize(field)
    call MPI_Barrier(comm)
    seconds(2) = MPI_Wtime()
    do it = 1, iterations
        call pmr_exchange(field)
        call update(field)
    end do
    seconds(2) = MPI_Wtime() - seconds(2)
    call pmr_connection_provider(connections(2), provider)

    equal = all(transfer(field(1:nx, 1:ny, 1:nz), 0_int64, nx * ny * nz) == &
                transfer(reference(1:nx, 1:ny, 1:nz), 0_int64, nx * ny * nz))
    checksum = sum(field(1:nx, 1:ny, 1:nz))
    call MPI_Allreduce(equal, all_equal, 1, MPI_LOGICAL, MPI_LAND, comm)
    call MPI_Allreduce(checksum, total, 1, MPI_DOUBLE_PRECISION, MPI_SUM, comm)
    call MPI_Allreduce(seconds, slowest, 2, MPI_DOUBLE_PRECISION, MPI_MAX, comm)
    if (rank == 0) then
        write (*, '(a, i0, " x ", i0, " x ", i0, a, i0, " x ", i0, " x ", i0, a, i0, a, i0, a)') &
            'pmr-halo3d-fortran: grid ', extent, ' of ', n, ' cells, periodic ', periodic, ', ', &
            iterations, ' iterations'
        write (*, '(a, f10.6, a, f10.6, a, f6.2, a, a)') '  MPI_Sendrecv: ', slowest(1), &
            ' s   pmr: ', slowest(2), ' s   MPI / pmr: ', slowest(1) / max(slowest(2), 1d-12), &
            '   +x provider: ', trim(provider)
        write (*, '(a, es20.12, a, a)') '  checksum ', total, ', results ', &
            trim(merge('bitwise equal     ', 'DIFFERENT (FAILED)', all_equal))
    end if

    call destroy_windows()
    call pmr_communicator_destroy(cart)
    call MPI_Finalize()
    if (.not. all_equal) error stop 1

contains

    subroutine parse_options(n, iterations, periodic)
        integer, intent(out) :: n(3), iterations, periodic
        character(len=64) :: name, value
        integer :: i, status
        n = 16
        iterations = 100
        periodic = 0
        i = 1
        do while (i <= command_argument_count())
            call get_command_argument(i, name)
            if (name == '--help' .or. name == '-h') then
                if (rank == 0) write (*, '(a)') 'usage: mpirun -np P pmr-halo3d-fortran '// &
                    '[--size N] [--iterations N] [--periodic 0|1]'
                call MPI_Finalize()
                stop
            end if
            call get_command_argument(i + 1, value)
            status = 1
            select case (name)
            case ('--size')
                read (value, *, iostat=status) n(1)
                n = n(1)
                if (n(1) < 1) status = 1
            case ('--iterations')
                read (value, *, iostat=status) iterations
                if (iterations < 0) status = 1
            case ('--periodic')
                read (value, *, iostat=status) periodic
                if (periodic /= 0 .and. periodic /= 1) status = 1
            end select
            if (status /= 0) then
                if (rank == 0) write (error_unit, '(a)') 'pmr-halo3d-fortran: bad option '// &
                    trim(name)//' '//trim(value)
                call MPI_Abort(MPI_COMM_WORLD, 2)
            end if
            i = i + 2
        end do
    end subroutine

    !> Face f: 1 -x, 2 +x, 3 -y, 4 +y, 5 -z, 6 +z.
    subroutine neighbours(cart, neighbor)
        type(pmr_communicator), intent(in) :: cart
        integer, intent(out) :: neighbor(6)
        integer :: f
        do f = 1, 6
            call pmr_communicator_neighbor(cart, (f - 1) / 2, merge(-1, 1, mod(f, 2) == 1), &
                                           neighbor(f))
        end do
    end subroutine

    !> A smooth but direction-dependent start on global coordinates, ghosts included.
    subroutine initialize(u)
        real(8), intent(out) :: u(0:, 0:, 0:)
        integer :: i, j, k
        real(8) :: x, y, z
        do k = 0, nz + 1
            do j = 0, ny + 1
                do i = 0, nx + 1
                    x = coords(1) * nx + i - 1
                    y = coords(2) * ny + j - 1
                    z = coords(3) * nz + k - 1
                    u(i, j, k) = sin(0.31d0 * x + 0.17d0) * cos(0.23d0 * y - 0.4d0) + 0.01d0 * z + &
                                 0.5d0 * sin(0.07d0 * x * z + 0.11d0 * y)
                end do
            end do
        end do
    end subroutine

    subroutine update(u)
        real(8), intent(inout) :: u(0:, 0:, 0:)
        integer :: i, j, k
        do k = 1, nz
            do j = 1, ny
                do i = 1, nx
                    next(i, j, k) = (u(i, j, k) + u(i - 1, j, k) + u(i + 1, j, k) + u(i, j - 1, k) + &
                                     u(i, j + 1, k) + u(i, j, k - 1) + u(i, j, k + 1)) / 7
                end do
            end do
        end do
        u(1:nx, 1:ny, 1:nz) = next
    end subroutine

    subroutine pack(u, f, face)
        real(8), intent(in) :: u(0:, 0:, 0:)
        integer, intent(in) :: f
        real(8), intent(out) :: face(:, :)
        select case (f)
        case (1); face = u(1, 1:ny, 1:nz)
        case (2); face = u(nx, 1:ny, 1:nz)
        case (3); face = u(1:nx, 1, 1:nz)
        case (4); face = u(1:nx, ny, 1:nz)
        end select
    end subroutine

    subroutine unpack(u, f, face)
        real(8), intent(inout) :: u(0:, 0:, 0:)
        integer, intent(in) :: f
        real(8), intent(in) :: face(:, :)
        if (neighbor(f) == MPI_PROC_NULL) return ! nothing arrives: keep the boundary values
        select case (f)
        case (1); u(0, 1:ny, 1:nz) = face
        case (2); u(nx + 1, 1:ny, 1:nz) = face
        case (3); u(1:nx, 0, 1:nz) = face
        case (4); u(1:nx, ny + 1, 1:nz) = face
        end select
    end subroutine

    !> The reference: each face pair with MPI_Sendrecv, the same data as the pmr exchange.
    subroutine mpi_exchange(u)
        real(8), intent(inout) :: u(0:, 0:, 0:)
        integer :: f, partner, up
        do f = 1, 4
            call pack(u, f, buffers(f)%send)
        end do
        do f = 1, 4
            ! Face f sends to its neighbour and receives from the opposite one: tag = sending face.
            partner = merge(f + 1, f - 1, mod(f, 2) == 1)
            call MPI_Sendrecv(buffers(f)%send, size(buffers(f)%send), MPI_DOUBLE_PRECISION, &
                              neighbor(f), f, buffers(partner)%recv, size(buffers(partner)%recv), &
                              MPI_DOUBLE_PRECISION, neighbor(partner), f, comm, MPI_STATUS_IGNORE)
        end do
        do f = 1, 4
            call unpack(u, f, buffers(f)%recv)
        end do
        up = (nx + 2) * (ny + 2)
        call MPI_Sendrecv(u(:, :, 1), up, MPI_DOUBLE_PRECISION, neighbor(5), 5, u(:, :, nz + 1), up, &
                          MPI_DOUBLE_PRECISION, neighbor(6), 5, comm, MPI_STATUS_IGNORE)
        call MPI_Sendrecv(u(:, :, nz), up, MPI_DOUBLE_PRECISION, neighbor(6), 6, u(:, :, 0), up, &
                          MPI_DOUBLE_PRECISION, neighbor(5), 6, comm, MPI_STATUS_IGNORE)
    end subroutine

    subroutine create_windows()
        integer :: f
        integer(int64) :: slab
        do f = 1, 6
            call pmr_connection_create_neighbor(cart, (f - 1) / 2, merge(-1, 1, mod(f, 2) == 1), 0, &
                                                connections(f))
        end do
        do f = 1, 4
            call pmr_send_window_create(connections(f), buffers(f)%send, &
                                        storage_size(buffers(f)%send) / 8 * size(buffers(f)%send), &
                                        sends(f))
            call pmr_recv_window_create(connections(f), buffers(f)%recv, &
                                        storage_size(buffers(f)%recv) / 8 * size(buffers(f)%recv), &
                                        recvs(f))
        end do
        ! z faces: slabs of the array itself (contiguous sections), the interior one to send and
        ! the ghost one to receive.
        slab = int(storage_size(field) / 8, int64) * (nx + 2) * (ny + 2)
        call pmr_send_window_create(connections(5), field(:, :, 1), slab, sends(5))
        call pmr_recv_window_create(connections(5), field(:, :, 0), slab, recvs(5))
        call pmr_send_window_create(connections(6), field(:, :, nz), slab, sends(6))
        call pmr_recv_window_create(connections(6), field(:, :, nz + 1), slab, recvs(6))
    end subroutine

    subroutine pmr_exchange(u)
        real(8), intent(inout) :: u(0:, 0:, 0:)
        integer :: f
        ! Grant every receive buffer first, so that data can flow while we pack.
        do f = 1, 6
            call pmr_recv_window_init(recvs(f))
        end do
        do f = 1, 6
            if (f <= 4) call pack(u, f, buffers(f)%send)
            call pmr_send_window_init(sends(f))
            call pmr_send_window_post(sends(f), window_bytes(f))
        end do
        do f = 1, 6
            call pmr_recv_window_post(recvs(f))
        end do
        do f = 1, 6
            call pmr_send_window_wait(sends(f))
        end do
        do f = 1, 6
            call pmr_recv_window_wait(recvs(f))
            if (f <= 4) call unpack(u, f, buffers(f)%recv) ! the z ghosts arrived in place
        end do
    end subroutine

    integer(int64) function window_bytes(f)
        integer, intent(in) :: f
        integer(c_size_t) :: bytes
        call pmr_send_window_size(sends(f), bytes)
        window_bytes = bytes
    end function

    subroutine destroy_windows()
        integer :: f
        do f = 1, 6
            call pmr_send_window_destroy(sends(f))
            call pmr_recv_window_destroy(recvs(f))
            call pmr_connection_destroy(connections(f))
        end do
    end subroutine

end program
