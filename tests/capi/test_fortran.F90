! SPDX-License-Identifier: MIT
! The Fortran module on any number of ranks: a halo exchange of a 3D array on a Cartesian grid
! (mpi_f08 communicator, windows over Fortran arrays), every ghost cell of every round checked
! against the neighbour's global coordinates; a connection made from an integer communicator handle
! with library-owned windows; and the error codes and messages of misuse. The verdict is combined
! over the ranks.
program test_fortran
    use mpi_f08
    use pmr
    use, intrinsic :: iso_c_binding, only: c_ptr, c_f_pointer, c_associated, c_size_t
    use, intrinsic :: iso_fortran_env, only: int64, error_unit
    implicit none

    integer, parameter :: nx = 4, ny = 3, nz = 5, rounds = 4
    integer :: failures = 0, checks = 0, rank, nranks, total, ierr

    call MPI_Init()
    call MPI_Comm_rank(MPI_COMM_WORLD, rank)
    call MPI_Comm_size(MPI_COMM_WORLD, nranks)

    call test_error_names()
    call test_misuse()
    call test_integer_handle()
    call test_integer_communicator()
    call test_halo([.true., .true., .true.])
    call test_halo([.false., .true., .false.])

    call MPI_Allreduce(merge(1, 0, failures > 0), total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD)
    if (rank == 0) then
        write (*, '(a, i0, a, a, a, i0, a, i0, a)') 'test_fortran on ', nranks, ' rank(s): ', &
            trim(merge('all passed', 'FAILED    ', total == 0)), ' (', total, &
            ' rank(s) failed, ', checks, ' checks on rank 0)'
    end if
    call MPI_Finalize()
    if (total /= 0) error stop 1

contains

    subroutine check(ok, what)
        logical, intent(in) :: ok
        character(len=*), intent(in) :: what
        checks = checks + 1
        if (.not. ok) then
            failures = failures + 1
            write (error_unit, '(a, i0, a, a)') 'FAILED on rank ', rank, ': ', what
        end if
    end subroutine

    !> ierr must be `expected`, and the last error message must contain `text`.
    subroutine check_error(ierr, expected, text, what)
        integer, intent(in) :: ierr, expected
        character(len=*), intent(in) :: text, what
        call check(ierr == expected, what//': got '//pmr_error_name(ierr)//', expected '// &
                   pmr_error_name(expected)//' ('//pmr_last_error()//')')
        call check(index(pmr_last_error(), text) > 0, what//': message lacks "'//text//'": '// &
                   pmr_last_error())
    end subroutine

    subroutine test_error_names()
        character(len=17), parameter :: names(0:9) = [character(len=17) :: 'PMR_SUCCESS', &
            'PMR_ERR_USAGE', 'PMR_ERR_ARGUMENT', 'PMR_ERR_SIZE', 'PMR_ERR_PROVIDER', &
            'PMR_ERR_BOOTSTRAP', 'PMR_ERR_TIMEOUT', 'PMR_ERR_PEER_LOST', 'PMR_ERR_NO_MEMORY', &
            'PMR_ERR_OTHER']
        integer, parameter :: codes(0:9) = [PMR_SUCCESS, PMR_ERR_USAGE, PMR_ERR_ARGUMENT, &
            PMR_ERR_SIZE, PMR_ERR_PROVIDER, PMR_ERR_BOOTSTRAP, PMR_ERR_TIMEOUT, PMR_ERR_PEER_LOST, &
            PMR_ERR_NO_MEMORY, PMR_ERR_OTHER]
        integer :: i
        ! The Fortran constants name the same codes as the C ones.
        do i = 0, 9
            call check(pmr_error_name(codes(i)) == trim(names(i)), 'code of '//trim(names(i)))
        end do
    end subroutine

    subroutine test_misuse()
        type(pmr_connection) :: c, never_created
        type(pmr_send_window) :: s, no_window
        type(pmr_recv_window) :: r
        real(8), target :: a(6, 5, 4), out(8), in(8)
        integer(c_size_t) :: bytes
        logical :: done
        integer :: k

        ! Handles that were never created (or were destroyed) are PMR_ERR_ARGUMENT.
        call pmr_send_window_init(no_window, ierr)
        call check_error(ierr, PMR_ERR_ARGUMENT, 'send_window handle is NULL', 'init of no window')
        call pmr_send_window_create(never_created, out, 64, s, ierr)
        call check_error(ierr, PMR_ERR_ARGUMENT, 'connection handle is NULL', 'window on no connection')

        call pmr_connection_create(MPI_COMM_WORLD, rank, 3, 3, c, ierr)
        call check(ierr == PMR_SUCCESS, 'self connection: '//pmr_last_error())
        ! A non-contiguous section cannot be a window: pmr keeps the address.
        call pmr_send_window_create(c, a(2, :, :), 8 * 20, s, ierr)
        call check_error(ierr, PMR_ERR_ARGUMENT, 'not contiguous', 'non-contiguous section')
        call pmr_send_window_create(c, out, -8, s, ierr)
        call check_error(ierr, PMR_ERR_SIZE, 'negative', 'negative size')

        ! A contiguous section is fine; calls out of order are PMR_ERR_USAGE.
        call pmr_send_window_create(c, out, 64, s, ierr)
        call check(ierr == PMR_SUCCESS, 'send window: '//pmr_last_error())
        call pmr_recv_window_create(c, in, int(storage_size(in) / 8 * 8, int64), r, ierr)
        call check(ierr == PMR_SUCCESS, 'recv window: '//pmr_last_error())
        call pmr_send_window_post(s, 64, ierr)
        call check_error(ierr, PMR_ERR_USAGE, 'before init()', 'post before init')
        call pmr_recv_window_received_bytes(r, bytes, ierr)
        call check_error(ierr, PMR_ERR_USAGE, 'received_bytes', 'received bytes before a round')

        ! One round through test() polling; then a post beyond the window.
        out = [(real(i_of(k), 8), k=1, 8)]
        in = 0
        call pmr_recv_window_init(r, ierr)
        call pmr_send_window_init(s, ierr)
        call pmr_send_window_post(s, 65_int64, ierr)
        call check_error(ierr, PMR_ERR_SIZE, 'exceeds', 'post beyond the window')
        call pmr_send_window_post(s, 64_int64, ierr)
        call pmr_recv_window_post(r, ierr)
        done = .false.
        do while (.not. done)
            call pmr_send_window_test(s, done, ierr)
            if (ierr /= PMR_SUCCESS) exit
        end do
        done = .false.
        do while (.not. done)
            call pmr_recv_window_test(r, done, ierr)
            if (ierr /= PMR_SUCCESS) exit
        end do
        call check(ierr == PMR_SUCCESS .and. all(in == out), 'round through test()')
        call pmr_recv_window_received_bytes(r, bytes, ierr)
        call check(bytes == 64, 'received bytes')

        call pmr_send_window_destroy(s, ierr)
        call pmr_recv_window_destroy(r, ierr)
        call pmr_connection_destroy(c, ierr)
        call check(ierr == PMR_SUCCESS, 'destroy')
        call pmr_recv_window_wait(r, ierr)
        call check_error(ierr, PMR_ERR_ARGUMENT, 'NULL', 'wait on a destroyed window')
    end subroutine

    pure integer function i_of(k)
        integer, intent(in) :: k
        i_of = 3 * k + 1
    end function

    !> An integer communicator handle (as from `use mpi`), library-owned windows.
    subroutine test_integer_handle()
        type(pmr_connection) :: c
        type(pmr_send_window) :: s
        type(pmr_recv_window) :: r
        real(8), pointer :: out(:), in(:)
        integer(c_size_t) :: bytes
        character(len=16) :: provider
        integer :: k
        logical :: flag

        call pmr_connection_create(MPI_COMM_WORLD%MPI_VAL, rank, 4, 4, c, ierr)
        call check(ierr == PMR_SUCCESS, 'connection from an integer handle: '//pmr_last_error())
        call pmr_send_window_create_owned(c, 10 * 8, s, ierr)
        call pmr_recv_window_create_owned(c, 10_int64 * 8, r, ierr)
        call check(ierr == PMR_SUCCESS, 'owned windows: '//pmr_last_error())
        ! Without blocking: the provider of a self connection is chosen at creation.
        call pmr_connection_established(c, flag, ierr)
        call check(ierr == PMR_SUCCESS .and. .not. flag, 'not established before the handshake')
        call pmr_connection_chosen_provider(c, provider, flag, ierr)
        call check(ierr == PMR_SUCCESS .and. flag .and. provider == 'self', 'chosen provider')
        call pmr_connection_establish(c, ierr)
        call check(ierr == PMR_SUCCESS, 'establish: '//pmr_last_error())
        call pmr_connection_established(c, flag, ierr)
        call check(ierr == PMR_SUCCESS .and. flag, 'established after establish')
        call pmr_send_window_size(s, bytes, ierr)
        call check(bytes == 80, 'owned window size')
        bytes = 0
        call pmr_recv_window_size(r, bytes, ierr)
        call check(ierr == PMR_SUCCESS .and. bytes == 80, 'owned receive window size')
        call check(c_associated(pmr_send_window_data(s)), 'owned window memory')
        call c_f_pointer(pmr_send_window_data(s), out, [10])
        call c_f_pointer(pmr_recv_window_data(r), in, [10])
        call check(all(in == 0), 'owned memory is zero-filled')
        out = [(0.5d0 * k, k=1, 10)]
        call pmr_recv_window_init(r, ierr)
        call pmr_send_window_init(s, ierr)
        call pmr_send_window_post(s, 40, ierr) ! the first 5 values only
        call pmr_recv_window_post(r, ierr)
        call pmr_send_window_wait(s, ierr)
        call pmr_recv_window_wait(r, ierr)
        call check(ierr == PMR_SUCCESS, 'owned round: '//pmr_last_error())
        call check(all(in(1:5) == out(1:5)) .and. all(in(6:10) == 0), 'partial post')
        call pmr_recv_window_received_bytes(r, bytes, ierr)
        call check(bytes == 40, 'partial received bytes')
        ! A wait with its own timeout: PMR_ERR_TIMEOUT while nothing was sent, then it completes.
        call pmr_recv_window_init(r, ierr)
        call pmr_recv_window_post(r, ierr)
        call pmr_recv_window_wait_timeout(r, 0.05d0, ierr)
        call check_error(ierr, PMR_ERR_TIMEOUT, 'the timeout given to wait()', 'own timeout')
        call pmr_send_window_init(s, ierr)
        call pmr_send_window_post(s, 80, ierr)
        call pmr_send_window_wait_timeout(s, 60d0, ierr)
        call pmr_recv_window_wait_timeout(r, 60d0, ierr)
        call check(ierr == PMR_SUCCESS, 'waits with their own timeout: '//pmr_last_error())
        call pmr_connection_provider(c, provider, ierr)
        call check(provider == 'self', 'provider of a self connection: '//provider)
        call pmr_send_window_destroy(s)
        call pmr_recv_window_destroy(r)
        call pmr_connection_destroy(c)
        call pmr_connection_establish(c, ierr)
        call check_error(ierr, PMR_ERR_ARGUMENT, 'handle is NULL', 'establish after destroy')
    end subroutine

    !> Communicators from an integer handle (as from `use mpi`): a grid and a plain wrap, their
    !> size, dimensions and integer communicator.
    subroutine test_integer_communicator()
        type(pmr_communicator) :: cart, plain
        type(MPI_Comm) :: comm
        integer :: handle, value, topology

        call pmr_communicator_create(MPI_COMM_WORLD%MPI_VAL, [nranks, 1], [.true., .false.], &
                                     .false., cart, ierr)
        call check(ierr == PMR_SUCCESS, 'grid from an integer handle: '//pmr_last_error())
        call pmr_communicator_size(cart, value, ierr)
        call check(ierr == PMR_SUCCESS .and. value == nranks, 'size of the grid')
        call pmr_communicator_dimensions(cart, value, ierr)
        call check(ierr == PMR_SUCCESS .and. value == 2, 'dimensions of the grid')
        call pmr_communicator_comm(cart, handle, ierr)
        call check(ierr == PMR_SUCCESS, 'integer handle of the grid: '//pmr_last_error())
        comm%MPI_VAL = handle
        call MPI_Topo_test(comm, topology)
        call check(topology == MPI_CART, 'the integer handle is the Cartesian communicator')
        call MPI_Comm_size(comm, value)
        call check(value == nranks, 'size through the integer handle')

        call pmr_communicator_create(MPI_COMM_WORLD%MPI_VAL, plain, ierr)
        call check(ierr == PMR_SUCCESS, 'wrap of an integer handle: '//pmr_last_error())
        call pmr_communicator_dimensions(plain, value, ierr)
        call check(ierr == PMR_SUCCESS .and. value == 0, 'no grid in a plain wrap')
        call pmr_communicator_size(plain, value, ierr)
        call check(value == nranks, 'size of the plain wrap')
        call pmr_communicator_destroy(plain, ierr)
        call pmr_communicator_destroy(cart, ierr)
        call check(ierr == PMR_SUCCESS, 'destroy: '//pmr_last_error())
        call pmr_communicator_size(cart, value, ierr)
        call check_error(ierr, PMR_ERR_ARGUMENT, 'handle is NULL', 'size after destroy')
    end subroutine

    pure real(8) function value_at(g, round)
        integer, intent(in) :: g(3), round
        value_at = real(g(1), 8) + 1000d0 * g(2) + 1000000d0 * g(3) + 0.25d0 * round
    end function

    !> Halo exchange of u(0:nx+1, 0:ny+1, 0:nz+1): faces packed into contiguous arrays that are
    !> the windows, unpacked into the ghost layers, every ghost checked.
    subroutine test_halo(periods)
        logical, intent(in) :: periods(3)
        type :: Face
            real(8), allocatable :: send(:, :), recv(:, :)
        end type
        type(Face), target :: faces(6)
        real(8) :: u(0:nx + 1, 0:ny + 1, 0:nz + 1)
        type(pmr_communicator) :: cart
        type(pmr_connection) :: connections(6)
        type(pmr_send_window) :: sends(6)
        type(pmr_recv_window) :: recvs(6)
        type(MPI_Comm) :: cart_comm
        integer :: extent(3), coords(3), neighbor(6), n(3), f, d, direction, round, i, j, k
        integer :: cart_rank, mpi_cart_rank, bad
        logical :: periodic(3), done

        n = [nx, ny, nz]
        call pmr_communicator_create(MPI_COMM_WORLD, [0, 0, 0], periods, .false., cart, ierr)
        call check(ierr == PMR_SUCCESS, 'Cartesian grid: '//pmr_last_error())
        call pmr_communicator_grid(cart, dims=extent, periods=periodic, coords=coords, ierr=ierr)
        call check(all(periodic .eqv. periods), 'periodicity')
        call pmr_communicator_comm(cart, cart_comm, ierr)
        call pmr_communicator_rank(cart, cart_rank, ierr)
        call MPI_Comm_rank(cart_comm, mpi_cart_rank)
        call check(cart_rank == mpi_cart_rank, 'rank in the Cartesian communicator')

        do f = 1, 6
            d = (f + 1) / 2
            direction = merge(-1, 1, mod(f, 2) == 1)
            call pmr_communicator_neighbor(cart, d - 1, direction, neighbor(f), ierr)
            call pmr_connection_create_neighbor(cart, d - 1, direction, 0, connections(f), ierr)
            call check(ierr == PMR_SUCCESS, 'neighbour connection: '//pmr_last_error())
            select case (d)
            case (1)
                allocate (faces(f)%send(ny, nz), faces(f)%recv(ny, nz))
            case (2)
                allocate (faces(f)%send(nx, nz), faces(f)%recv(nx, nz))
            case (3)
                allocate (faces(f)%send(nx, ny), faces(f)%recv(nx, ny))
            end select
            if (d == 3) then ! both kinds of byte counts
                call pmr_send_window_create(connections(f), faces(f)%send, &
                                            int(storage_size(faces(f)%send) / 8, int64) * &
                                            size(faces(f)%send), sends(f), ierr)
            else
                call pmr_send_window_create(connections(f), faces(f)%send, &
                                            storage_size(faces(f)%send) / 8 * size(faces(f)%send), &
                                            sends(f), ierr)
            end if
            call pmr_recv_window_create(connections(f), faces(f)%recv, &
                                        storage_size(faces(f)%recv) / 8 * size(faces(f)%recv), &
                                        recvs(f), ierr)
            call check(ierr == PMR_SUCCESS, 'face windows: '//pmr_last_error())
        end do

        bad = 0
        do round = 1, rounds
            u = -1
            do k = 1, nz
                do j = 1, ny
                    do i = 1, nx
                        u(i, j, k) = value_at(coords * n + [i, j, k] - 1, round)
                    end do
                end do
            end do
            do f = 1, 6
                call pmr_recv_window_init(recvs(f), ierr)
            end do
            do f = 1, 6
                select case (f)
                case (1); faces(f)%send(:, :) = u(1, 1:ny, 1:nz)
                case (2); faces(f)%send(:, :) = u(nx, 1:ny, 1:nz)
                case (3); faces(f)%send(:, :) = u(1:nx, 1, 1:nz)
                case (4); faces(f)%send(:, :) = u(1:nx, ny, 1:nz)
                case (5); faces(f)%send(:, :) = u(1:nx, 1:ny, 1)
                case (6); faces(f)%send(:, :) = u(1:nx, 1:ny, nz)
                end select
                call pmr_send_window_init(sends(f), ierr)
                call pmr_send_window_post(sends(f), storage_size(faces(f)%send) / 8 * &
                                          size(faces(f)%send), ierr)
            end do
            do f = 1, 6
                call pmr_recv_window_post(recvs(f), ierr)
            end do
            ! Rounds 3 and 4 complete all windows at once: pmr_wait_all, then pmr_test_all.
            if (round == 3) then
                call pmr_wait_all(sends, recvs, ierr)
                call check(ierr == PMR_SUCCESS, 'pmr_wait_all: '//pmr_last_error())
            else if (round == 4) then
                done = .false.
                do while (.not. done .and. ierr == PMR_SUCCESS)
                    call pmr_test_all(sends, recvs, done, ierr)
                end do
                call check(ierr == PMR_SUCCESS, 'pmr_test_all: '//pmr_last_error())
            end if
            do f = 1, 6
                if (round == 3 .or. round == 4) then
                    ! Completed above: each window is idle again (a second wait is a usage error).
                    call pmr_recv_window_wait(recvs(f), ierr)
                    call check(ierr == PMR_ERR_USAGE, 'a window completed by wait_all/test_all')
                    ierr = PMR_SUCCESS
                else
                    call pmr_send_window_wait(sends(f), ierr)
                    if (mod(round, 2) == 0) then
                        call pmr_recv_window_wait(recvs(f), ierr)
                    else
                        done = .false.
                        do while (.not. done .and. ierr == PMR_SUCCESS)
                            call pmr_recv_window_test(recvs(f), done, ierr)
                        end do
                    end if
                end if
                call check(ierr == PMR_SUCCESS, 'halo round: '//pmr_last_error())
                if (neighbor(f) == MPI_PROC_NULL) cycle
                select case (f)
                case (1); u(0, 1:ny, 1:nz) = faces(f)%recv
                case (2); u(nx + 1, 1:ny, 1:nz) = faces(f)%recv
                case (3); u(1:nx, 0, 1:nz) = faces(f)%recv
                case (4); u(1:nx, ny + 1, 1:nz) = faces(f)%recv
                case (5); u(1:nx, 1:ny, 0) = faces(f)%recv
                case (6); u(1:nx, 1:ny, nz + 1) = faces(f)%recv
                end select
            end do
            ! Every ghost cell of the six faces (edges and corners are not exchanged).
            do k = 0, nz + 1
                do j = 0, ny + 1
                    do i = 0, nx + 1
                        call check_ghost(u, [i, j, k], n, coords, extent, neighbor, round, bad)
                    end do
                end do
            end do
        end do
        call check(bad == 0, 'ghost cells')
        if (rank == 0) write (*, '(a, 3i3, a, 3l2, a)') 'grid', extent, ', periodic', periods, &
            ': halos checked'

        do f = 1, 6
            call pmr_send_window_destroy(sends(f), ierr)
            call pmr_recv_window_destroy(recvs(f), ierr)
            call pmr_connection_destroy(connections(f), ierr)
        end do
        call pmr_communicator_destroy(cart, ierr)
        call check(ierr == PMR_SUCCESS, 'communicator destroyed')

    end subroutine

    !> A ghost cell of a face holds the value of the neighbour's cell at the same global
    !> coordinates (wrapped around a periodic dimension), or -1 next to a closed border.
    subroutine check_ghost(u, c, n, coords, extent, neighbor, round, bad)
        real(8), intent(in) :: u(0:, 0:, 0:)
        integer, intent(in) :: c(3), n(3), coords(3), extent(3), neighbor(6), round
        integer, intent(inout) :: bad
        integer :: d, g(3), f
        real(8) :: expected
        if (count(c < 1 .or. c > n) /= 1) return ! interior, or an edge or corner
        expected = -1
        do d = 1, 3
            if (c(d) < 1 .or. c(d) > n(d)) then
                f = 2 * d - merge(1, 0, c(d) < 1)
                if (neighbor(f) /= MPI_PROC_NULL) then
                    g = modulo(coords * n + c - 1, extent * n)
                    expected = value_at(g, round)
                end if
            end if
        end do
        if (u(c(1), c(2), c(3)) /= expected) then
            bad = bad + 1
            if (bad <= 5) write (error_unit, '(a, i0, a, 3i3, a, g0, a, g0)') 'rank ', rank, &
                ': ghost', c, ' is ', u(c(1), c(2), c(3)), ', expected ', expected
        end if
    end subroutine

end program
