! SPDX-License-Identifier: MIT
!> The Fortran interface of pmr: `use pmr`. The operations and error codes of the C interface
!> (include/pmr/pmr.h), through ISO_C_BINDING.
!>
!> - Communicators: the integer handles of `use mpi` / mpif.h and `type(MPI_Comm)` of `mpi_f08`.
!> - Errors: every subroutine has an optional last argument `ierr`. Present: it receives
!>   PMR_SUCCESS or a PMR_ERR_* code, and pmr_last_error() the message. Absent: an error prints
!>   "<subroutine>: <message>" on the error unit and ends the program with `error stop <code>`,
!>   which the MPI launchers turn into the end of the whole job, as MPI's default error handler
!>   (MPI_ERRORS_ARE_FATAL) would.
!> - Windows are byte windows: `bytes` counts bytes (integer of kind int32 or int64), e.g.
!>   `storage_size(a) / 8 * size(a)` or `c_sizeof(a)`. A window over an array keeps the array's
!>   address, so the array must be contiguous (checked: PMR_ERR_ARGUMENT otherwise), must have
!>   the TARGET attribute (pmr writes it between init and wait, behind the compiler's back, as MPI
!>   does with nonblocking buffers) and must live until the window is destroyed.
!> - Dimensions of Cartesian grids count from 0, as in MPI_Cart_shift; directions are -1 and +1.
module pmr
    use, intrinsic :: iso_c_binding, only: c_ptr, c_null_ptr, c_int, c_size_t, c_char, &
                                           c_null_char, c_loc, c_associated, c_f_pointer, c_double
    use, intrinsic :: iso_fortran_env, only: error_unit, int32, int64, real64
#ifdef PMR_HAVE_MPI_F08
    use mpi_f08, only: MPI_Comm
#endif
    implicit none
    private

    ! Return codes, equal to those of pmr.h.
    integer, parameter, public :: PMR_SUCCESS = 0
    integer, parameter, public :: PMR_ERR_USAGE = 1
    integer, parameter, public :: PMR_ERR_ARGUMENT = 2
    integer, parameter, public :: PMR_ERR_SIZE = 3
    integer, parameter, public :: PMR_ERR_PROVIDER = 4
    integer, parameter, public :: PMR_ERR_BOOTSTRAP = 5
    integer, parameter, public :: PMR_ERR_TIMEOUT = 6
    integer, parameter, public :: PMR_ERR_PEER_LOST = 7
    integer, parameter, public :: PMR_ERR_NO_MEMORY = 8
    integer, parameter, public :: PMR_ERR_OTHER = 9

    !> Handles; default-initialised to "no object". Destroy sets them back.
    type, public :: pmr_connection
        private
        type(c_ptr) :: handle = c_null_ptr
    end type
    type, public :: pmr_send_window
        private
        type(c_ptr) :: handle = c_null_ptr
    end type
    type, public :: pmr_recv_window
        private
        type(c_ptr) :: handle = c_null_ptr
    end type
    type, public :: pmr_communicator
        private
        type(c_ptr) :: handle = c_null_ptr
    end type

    public :: pmr_last_error, pmr_error_name
    public :: pmr_connection_create, pmr_connection_destroy, pmr_connection_establish, &
              pmr_connection_provider, pmr_connection_create_neighbor, &
              pmr_connection_established, pmr_connection_chosen_provider
    public :: pmr_send_window_create, pmr_send_window_create_owned, pmr_send_window_data, &
              pmr_send_window_size, pmr_send_window_init, pmr_send_window_post, &
              pmr_send_window_wait, pmr_send_window_wait_timeout, pmr_send_window_test, &
              pmr_send_window_destroy
    public :: pmr_recv_window_create, pmr_recv_window_create_owned, pmr_recv_window_data, &
              pmr_recv_window_size, pmr_recv_window_init, pmr_recv_window_post, &
              pmr_recv_window_wait, pmr_recv_window_wait_timeout, pmr_recv_window_test, &
              pmr_recv_window_received_bytes, pmr_recv_window_destroy
    public :: pmr_wait_all, pmr_wait_all_timeout, pmr_test_all
    public :: pmr_communicator_create, pmr_communicator_destroy, pmr_communicator_comm, &
              pmr_communicator_rank, pmr_communicator_size, pmr_communicator_dimensions, &
              pmr_communicator_grid, pmr_communicator_neighbor

    !> pmr_connection_create(comm, peer, send_tag, recv_tag, connection [, ierr])
    interface pmr_connection_create
        module procedure connection_create_integer
#ifdef PMR_HAVE_MPI_F08
        module procedure connection_create_f08
#endif
    end interface

    !> pmr_send_window_create(connection, buffer, bytes, window [, ierr]): a window over `buffer`.
    interface pmr_send_window_create
        module procedure send_window_create_int32, send_window_create_int64
    end interface
    interface pmr_recv_window_create
        module procedure recv_window_create_int32, recv_window_create_int64
    end interface
    !> pmr_send_window_create_owned(connection, bytes, window [, ierr]): library-owned memory,
    !> reached through pmr_send_window_data(window) and c_f_pointer.
    interface pmr_send_window_create_owned
        module procedure send_window_create_owned_int32, send_window_create_owned_int64
    end interface
    interface pmr_recv_window_create_owned
        module procedure recv_window_create_owned_int32, recv_window_create_owned_int64
    end interface
    !> pmr_send_window_post(window, bytes [, ierr]): transfers the first `bytes` bytes.
    interface pmr_send_window_post
        module procedure send_window_post_int32, send_window_post_int64
    end interface

    !> pmr_communicator_create(comm, dims, periods, reorder, communicator [, ierr]): a Cartesian
    !> grid (collective; dims entries 0 are chosen by MPI_Dims_create);
    !> pmr_communicator_create(comm, communicator [, ierr]): wraps comm (its grid, if Cartesian).
    interface pmr_communicator_create
        module procedure communicator_create_integer, communicator_wrap_integer
#ifdef PMR_HAVE_MPI_F08
        module procedure communicator_create_f08, communicator_wrap_f08
#endif
    end interface
    !> pmr_communicator_comm(communicator, comm [, ierr]): the (Cartesian) MPI communicator.
    interface pmr_communicator_comm
        module procedure communicator_comm_integer
#ifdef PMR_HAVE_MPI_F08
        module procedure communicator_comm_f08
#endif
    end interface

    ! The C interface.
    interface
        function c_last_error() bind(C, name="pmr_last_error") result(message)
            import :: c_ptr
            type(c_ptr) :: message
        end function
        function c_error_name(code) bind(C, name="pmr_error_name") result(name)
            import :: c_ptr, c_int
            integer(c_int), value :: code
            type(c_ptr) :: name
        end function
        function c_strlen(text) bind(C, name="strlen") result(length)
            import :: c_ptr, c_size_t
            type(c_ptr), value :: text
            integer(c_size_t) :: length
        end function
        function c_record_error(code, message) bind(C, name="pmr_capi_record_error") result(rc)
            import :: c_int, c_char
            integer(c_int), value :: code
            character(kind=c_char), dimension(*), intent(in) :: message
            integer(c_int) :: rc
        end function

        function f_connection_create(comm, peer, send_tag, recv_tag, connection) &
            bind(C, name="pmr_fortran_connection_create") result(rc)
            import :: c_int, c_ptr
            integer(c_int), value :: comm, peer, send_tag, recv_tag
            type(c_ptr), intent(out) :: connection
            integer(c_int) :: rc
        end function
        function c_connection_destroy(connection) bind(C, name="pmr_connection_destroy") result(rc)
            import :: c_int, c_ptr
            type(c_ptr), intent(inout) :: connection
            integer(c_int) :: rc
        end function
        function c_connection_establish(connection) bind(C, name="pmr_connection_establish") &
            result(rc)
            import :: c_int, c_ptr
            type(c_ptr), value :: connection
            integer(c_int) :: rc
        end function
        function c_connection_provider(connection, name, length) &
            bind(C, name="pmr_connection_provider") result(rc)
            import :: c_int, c_ptr, c_char, c_size_t
            type(c_ptr), value :: connection
            character(kind=c_char), dimension(*), intent(out) :: name
            integer(c_size_t), value :: length
            integer(c_int) :: rc
        end function
        function c_connection_established(connection, established) &
            bind(C, name="pmr_connection_established") result(rc)
            import :: c_int, c_ptr
            type(c_ptr), value :: connection
            integer(c_int), intent(out) :: established
            integer(c_int) :: rc
        end function
        function c_connection_chosen_provider(connection, name, length, chosen) &
            bind(C, name="pmr_connection_chosen_provider") result(rc)
            import :: c_int, c_ptr, c_char, c_size_t
            type(c_ptr), value :: connection
            character(kind=c_char), dimension(*), intent(out) :: name
            integer(c_size_t), value :: length
            integer(c_int), intent(out) :: chosen
            integer(c_int) :: rc
        end function

        function c_send_window_create(connection, buffer, bytes, window) &
            bind(C, name="pmr_send_window_create") result(rc)
            import :: c_int, c_ptr, c_size_t
            type(c_ptr), value :: connection, buffer
            integer(c_size_t), value :: bytes
            type(c_ptr), intent(out) :: window
            integer(c_int) :: rc
        end function
        function c_recv_window_create(connection, buffer, bytes, window) &
            bind(C, name="pmr_recv_window_create") result(rc)
            import :: c_int, c_ptr, c_size_t
            type(c_ptr), value :: connection, buffer
            integer(c_size_t), value :: bytes
            type(c_ptr), intent(out) :: window
            integer(c_int) :: rc
        end function
        function c_send_window_data(window) bind(C, name="pmr_send_window_data") result(data)
            import :: c_ptr
            type(c_ptr), value :: window
            type(c_ptr) :: data
        end function
        function c_recv_window_data(window) bind(C, name="pmr_recv_window_data") result(data)
            import :: c_ptr
            type(c_ptr), value :: window
            type(c_ptr) :: data
        end function
        function c_send_window_size(window, bytes) bind(C, name="pmr_send_window_size") result(rc)
            import :: c_int, c_ptr, c_size_t
            type(c_ptr), value :: window
            integer(c_size_t), intent(out) :: bytes
            integer(c_int) :: rc
        end function
        function c_recv_window_size(window, bytes) bind(C, name="pmr_recv_window_size") result(rc)
            import :: c_int, c_ptr, c_size_t
            type(c_ptr), value :: window
            integer(c_size_t), intent(out) :: bytes
            integer(c_int) :: rc
        end function
        function c_send_window_init(window) bind(C, name="pmr_send_window_init") result(rc)
            import :: c_int, c_ptr
            type(c_ptr), value :: window
            integer(c_int) :: rc
        end function
        function c_send_window_post(window, bytes) bind(C, name="pmr_send_window_post") result(rc)
            import :: c_int, c_ptr, c_size_t
            type(c_ptr), value :: window
            integer(c_size_t), value :: bytes
            integer(c_int) :: rc
        end function
        function c_send_window_wait(window) bind(C, name="pmr_send_window_wait") result(rc)
            import :: c_int, c_ptr
            type(c_ptr), value :: window
            integer(c_int) :: rc
        end function
        function c_send_window_wait_timeout(window, seconds) &
                bind(C, name="pmr_send_window_wait_timeout") result(rc)
            import :: c_int, c_ptr, c_double
            type(c_ptr), value :: window
            real(c_double), value :: seconds
            integer(c_int) :: rc
        end function
        function c_send_window_test(window, done) bind(C, name="pmr_send_window_test") result(rc)
            import :: c_int, c_ptr
            type(c_ptr), value :: window
            integer(c_int), intent(out) :: done
            integer(c_int) :: rc
        end function
        function c_send_window_destroy(window) bind(C, name="pmr_send_window_destroy") result(rc)
            import :: c_int, c_ptr
            type(c_ptr), intent(inout) :: window
            integer(c_int) :: rc
        end function
        function c_recv_window_init(window) bind(C, name="pmr_recv_window_init") result(rc)
            import :: c_int, c_ptr
            type(c_ptr), value :: window
            integer(c_int) :: rc
        end function
        function c_recv_window_post(window) bind(C, name="pmr_recv_window_post") result(rc)
            import :: c_int, c_ptr
            type(c_ptr), value :: window
            integer(c_int) :: rc
        end function
        function c_recv_window_wait(window) bind(C, name="pmr_recv_window_wait") result(rc)
            import :: c_int, c_ptr
            type(c_ptr), value :: window
            integer(c_int) :: rc
        end function
        function c_recv_window_wait_timeout(window, seconds) &
                bind(C, name="pmr_recv_window_wait_timeout") result(rc)
            import :: c_int, c_ptr, c_double
            type(c_ptr), value :: window
            real(c_double), value :: seconds
            integer(c_int) :: rc
        end function
        function c_recv_window_test(window, done) bind(C, name="pmr_recv_window_test") result(rc)
            import :: c_int, c_ptr
            type(c_ptr), value :: window
            integer(c_int), intent(out) :: done
            integer(c_int) :: rc
        end function
        function c_wait_all(sends, nsends, recvs, nrecvs) bind(C, name="pmr_wait_all") result(rc)
            import :: c_int, c_ptr, c_size_t
            type(c_ptr), intent(in) :: sends(*)
            integer(c_size_t), value :: nsends
            type(c_ptr), intent(in) :: recvs(*)
            integer(c_size_t), value :: nrecvs
            integer(c_int) :: rc
        end function
        function c_wait_all_timeout(sends, nsends, recvs, nrecvs, seconds) &
                bind(C, name="pmr_wait_all_timeout") result(rc)
            import :: c_int, c_ptr, c_size_t, c_double
            type(c_ptr), intent(in) :: sends(*)
            integer(c_size_t), value :: nsends
            type(c_ptr), intent(in) :: recvs(*)
            integer(c_size_t), value :: nrecvs
            real(c_double), value :: seconds
            integer(c_int) :: rc
        end function
        function c_test_all(sends, nsends, recvs, nrecvs, done) bind(C, name="pmr_test_all") &
                result(rc)
            import :: c_int, c_ptr, c_size_t
            type(c_ptr), intent(in) :: sends(*)
            integer(c_size_t), value :: nsends
            type(c_ptr), intent(in) :: recvs(*)
            integer(c_size_t), value :: nrecvs
            integer(c_int), intent(out) :: done
            integer(c_int) :: rc
        end function
        function c_recv_window_received_bytes(window, bytes) &
            bind(C, name="pmr_recv_window_received_bytes") result(rc)
            import :: c_int, c_ptr, c_size_t
            type(c_ptr), value :: window
            integer(c_size_t), intent(out) :: bytes
            integer(c_int) :: rc
        end function
        function c_recv_window_destroy(window) bind(C, name="pmr_recv_window_destroy") result(rc)
            import :: c_int, c_ptr
            type(c_ptr), intent(inout) :: window
            integer(c_int) :: rc
        end function

        function f_communicator_create(comm, ndims, dims, periods, reorder, communicator) &
            bind(C, name="pmr_fortran_communicator_create") result(rc)
            import :: c_int, c_ptr
            integer(c_int), value :: comm, ndims
            integer(c_int), dimension(*), intent(in) :: dims, periods
            integer(c_int), value :: reorder
            type(c_ptr), intent(out) :: communicator
            integer(c_int) :: rc
        end function
        function c_communicator_destroy(communicator) bind(C, name="pmr_communicator_destroy") &
            result(rc)
            import :: c_int, c_ptr
            type(c_ptr), intent(inout) :: communicator
            integer(c_int) :: rc
        end function
        function f_communicator_comm(communicator, comm) &
            bind(C, name="pmr_fortran_communicator_comm") result(rc)
            import :: c_int, c_ptr
            type(c_ptr), value :: communicator
            integer(c_int), intent(out) :: comm
            integer(c_int) :: rc
        end function
        function c_communicator_rank(communicator, rank) bind(C, name="pmr_communicator_rank") &
            result(rc)
            import :: c_int, c_ptr
            type(c_ptr), value :: communicator
            integer(c_int), intent(out) :: rank
            integer(c_int) :: rc
        end function
        function c_communicator_size(communicator, size) bind(C, name="pmr_communicator_size") &
            result(rc)
            import :: c_int, c_ptr
            type(c_ptr), value :: communicator
            integer(c_int), intent(out) :: size
            integer(c_int) :: rc
        end function
        function c_communicator_dimensions(communicator, ndims) &
            bind(C, name="pmr_communicator_dimensions") result(rc)
            import :: c_int, c_ptr
            type(c_ptr), value :: communicator
            integer(c_int), intent(out) :: ndims
            integer(c_int) :: rc
        end function
        function c_communicator_grid(communicator, maxdims, dims, periods, coords) &
            bind(C, name="pmr_communicator_grid") result(rc)
            import :: c_int, c_ptr
            type(c_ptr), value :: communicator
            integer(c_int), value :: maxdims
            integer(c_int), dimension(*), intent(out) :: dims, periods, coords
            integer(c_int) :: rc
        end function
        function c_communicator_neighbor(communicator, dimension, direction, rank) &
            bind(C, name="pmr_communicator_neighbor") result(rc)
            import :: c_int, c_ptr
            type(c_ptr), value :: communicator
            integer(c_int), value :: dimension, direction
            integer(c_int), intent(out) :: rank
            integer(c_int) :: rc
        end function
        function c_connection_create_neighbor(communicator, dimension, direction, tag_offset, &
                                              connection) &
            bind(C, name="pmr_connection_create_neighbor") result(rc)
            import :: c_int, c_ptr
            type(c_ptr), value :: communicator
            integer(c_int), value :: dimension, direction, tag_offset
            type(c_ptr), intent(out) :: connection
            integer(c_int) :: rc
        end function
    end interface

contains

    ! --- errors ---------------------------------------------------------------------------------

    !> Message of this thread's last failed call ("" if none failed).
    function pmr_last_error() result(message)
        character(len=:), allocatable :: message
        message = from_c(c_last_error())
    end function

    !> "PMR_ERR_SIZE" for PMR_ERR_SIZE, and so on.
    function pmr_error_name(code) result(name)
        integer, intent(in) :: code
        character(len=:), allocatable :: name
        name = from_c(c_error_name(int(code, c_int)))
    end function

    function from_c(text) result(string)
        type(c_ptr), intent(in) :: text
        character(len=:), allocatable :: string
        character(kind=c_char), pointer :: chars(:)
        integer :: length, i
        if (.not. c_associated(text)) then
            string = ''
            return
        end if
        length = int(c_strlen(text))
        call c_f_pointer(text, chars, [length])
        allocate (character(len=length) :: string)
        do i = 1, length
            string(i:i) = chars(i)
        end do
    end function

    !> Hands `rc` to the caller through `ierr`, or, without `ierr`, ends the program on an error.
    subroutine finish(rc, ierr, name)
        integer(c_int), intent(in) :: rc
        integer, optional, intent(out) :: ierr
        character(len=*), intent(in) :: name
        if (present(ierr)) then
            ierr = int(rc)
        else if (rc /= PMR_SUCCESS) then
            write (error_unit, '(a)') name//' failed with '//pmr_error_name(int(rc))//': '// &
                pmr_last_error()
            flush (error_unit)
            error stop int(rc)
        end if
    end subroutine

    !> Records an error found on the Fortran side, so that pmr_last_error() tells it too.
    function fail(code, what, name, todo) result(rc)
        integer, intent(in) :: code
        character(len=*), intent(in) :: what, name, todo
        integer(c_int) :: rc
        rc = c_record_error(int(code, c_int), 'pmr: '//what//' ['//name//']. '//todo//c_null_char)
    end function

    function checked_bytes(bytes, name) result(rc)
        integer(int64), intent(in) :: bytes
        character(len=*), intent(in) :: name
        integer(c_int) :: rc
        rc = PMR_SUCCESS
        if (bytes < 0) then
            rc = fail(PMR_ERR_SIZE, 'the byte count is negative', name, &
                      'Pass the size in bytes, e.g. storage_size(a) / 8 * size(a).')
        end if
    end function

    ! --- connections ----------------------------------------------------------------------------

    subroutine connection_create_integer(comm, peer, send_tag, recv_tag, connection, ierr)
        integer, intent(in) :: comm, peer, send_tag, recv_tag
        type(pmr_connection), intent(out) :: connection
        integer, optional, intent(out) :: ierr
        call finish(f_connection_create(int(comm, c_int), int(peer, c_int), int(send_tag, c_int), &
                                        int(recv_tag, c_int), connection%handle), &
                    ierr, 'pmr_connection_create')
    end subroutine

#ifdef PMR_HAVE_MPI_F08
    subroutine connection_create_f08(comm, peer, send_tag, recv_tag, connection, ierr)
        type(MPI_Comm), intent(in) :: comm
        integer, intent(in) :: peer, send_tag, recv_tag
        type(pmr_connection), intent(out) :: connection
        integer, optional, intent(out) :: ierr
        call connection_create_integer(comm%MPI_VAL, peer, send_tag, recv_tag, connection, ierr)
    end subroutine
#endif

    subroutine pmr_connection_destroy(connection, ierr)
        type(pmr_connection), intent(inout) :: connection
        integer, optional, intent(out) :: ierr
        call finish(c_connection_destroy(connection%handle), ierr, 'pmr_connection_destroy')
    end subroutine

    subroutine pmr_connection_establish(connection, ierr)
        type(pmr_connection), intent(in) :: connection
        integer, optional, intent(out) :: ierr
        call finish(c_connection_establish(connection%handle), ierr, 'pmr_connection_establish')
    end subroutine

    !> The transport of the connection ("self", "shm", "ucx", ...).
    subroutine pmr_connection_provider(connection, name, ierr)
        type(pmr_connection), intent(in) :: connection
        character(len=*), intent(out) :: name
        integer, optional, intent(out) :: ierr
        character(kind=c_char) :: buffer(64)
        integer(c_int) :: rc
        name = ''
        rc = c_connection_provider(connection%handle, buffer, int(size(buffer), c_size_t))
        if (rc == PMR_SUCCESS) call copy_c_name(buffer, name)
        call finish(rc, ierr, 'pmr_connection_provider')
    end subroutine

    !> A 0-terminated C name into `name` (cut at its length).
    subroutine copy_c_name(buffer, name)
        character(kind=c_char), intent(in) :: buffer(:)
        character(len=*), intent(inout) :: name
        integer :: i
        do i = 1, min(len(name), size(buffer))
            if (buffer(i) == c_null_char) exit
            name(i:i) = buffer(i)
        end do
    end subroutine

    !> Whether the handshake has completed; never blocks.
    subroutine pmr_connection_established(connection, established, ierr)
        type(pmr_connection), intent(in) :: connection
        logical, intent(out) :: established
        integer, optional, intent(out) :: ierr
        integer(c_int) :: flag, rc
        flag = 0
        rc = c_connection_established(connection%handle, flag)
        established = flag /= 0
        call finish(rc, ierr, 'pmr_connection_established')
    end subroutine

    !> The provider if it is chosen already (chosen = .true.), else name = ''; never blocks.
    subroutine pmr_connection_chosen_provider(connection, name, chosen, ierr)
        type(pmr_connection), intent(in) :: connection
        character(len=*), intent(out) :: name
        logical, intent(out) :: chosen
        integer, optional, intent(out) :: ierr
        character(kind=c_char) :: buffer(64)
        integer(c_int) :: flag, rc
        name = ''
        flag = 0
        rc = c_connection_chosen_provider(connection%handle, buffer, int(size(buffer), c_size_t), &
                                          flag)
        chosen = flag /= 0
        if (rc == PMR_SUCCESS) call copy_c_name(buffer, name)
        call finish(rc, ierr, 'pmr_connection_chosen_provider')
    end subroutine

    ! --- windows ---------------------------------------------------------------------------------

    !> Address of `buffer` after checking that a window may keep it.
    function buffer_address(buffer, bytes, name, address) result(rc)
        type(*), dimension(..), target :: buffer
        integer(int64), intent(in) :: bytes
        character(len=*), intent(in) :: name
        type(c_ptr), intent(out) :: address
        integer(c_int) :: rc
        address = c_null_ptr
        rc = checked_bytes(bytes, name)
        if (rc /= PMR_SUCCESS) return
        if (.not. is_contiguous(buffer)) then
            rc = fail(PMR_ERR_ARGUMENT, 'the buffer is not contiguous', name, &
                      'pmr keeps the address of the buffer: pass a whole array or a contiguous '// &
                      'section (or pack into a contiguous array).')
            return
        end if
        address = c_loc(buffer)
    end function

    subroutine send_window_create_int64(connection, buffer, bytes, window, ierr)
        type(pmr_connection), intent(in) :: connection
        type(*), dimension(..), target :: buffer
        integer(int64), intent(in) :: bytes
        type(pmr_send_window), intent(out) :: window
        integer, optional, intent(out) :: ierr
        character(len=*), parameter :: name = 'pmr_send_window_create'
        type(c_ptr) :: address
        integer(c_int) :: rc
        rc = buffer_address(buffer, bytes, name, address)
        if (rc == PMR_SUCCESS) then
            rc = c_send_window_create(connection%handle, address, int(bytes, c_size_t), window%handle)
        end if
        call finish(rc, ierr, name)
    end subroutine

    subroutine send_window_create_int32(connection, buffer, bytes, window, ierr)
        type(pmr_connection), intent(in) :: connection
        type(*), dimension(..), target :: buffer
        integer(int32), intent(in) :: bytes
        type(pmr_send_window), intent(out) :: window
        integer, optional, intent(out) :: ierr
        call send_window_create_int64(connection, buffer, int(bytes, int64), window, ierr)
    end subroutine

    subroutine recv_window_create_int64(connection, buffer, bytes, window, ierr)
        type(pmr_connection), intent(in) :: connection
        type(*), dimension(..), target :: buffer
        integer(int64), intent(in) :: bytes
        type(pmr_recv_window), intent(out) :: window
        integer, optional, intent(out) :: ierr
        character(len=*), parameter :: name = 'pmr_recv_window_create'
        type(c_ptr) :: address
        integer(c_int) :: rc
        rc = buffer_address(buffer, bytes, name, address)
        if (rc == PMR_SUCCESS) then
            rc = c_recv_window_create(connection%handle, address, int(bytes, c_size_t), window%handle)
        end if
        call finish(rc, ierr, name)
    end subroutine

    subroutine recv_window_create_int32(connection, buffer, bytes, window, ierr)
        type(pmr_connection), intent(in) :: connection
        type(*), dimension(..), target :: buffer
        integer(int32), intent(in) :: bytes
        type(pmr_recv_window), intent(out) :: window
        integer, optional, intent(out) :: ierr
        call recv_window_create_int64(connection, buffer, int(bytes, int64), window, ierr)
    end subroutine

    subroutine send_window_create_owned_int64(connection, bytes, window, ierr)
        type(pmr_connection), intent(in) :: connection
        integer(int64), intent(in) :: bytes
        type(pmr_send_window), intent(out) :: window
        integer, optional, intent(out) :: ierr
        character(len=*), parameter :: name = 'pmr_send_window_create_owned'
        integer(c_int) :: rc
        rc = checked_bytes(bytes, name)
        if (rc == PMR_SUCCESS) then
            rc = c_send_window_create(connection%handle, c_null_ptr, int(bytes, c_size_t), &
                                      window%handle)
        end if
        call finish(rc, ierr, name)
    end subroutine

    subroutine send_window_create_owned_int32(connection, bytes, window, ierr)
        type(pmr_connection), intent(in) :: connection
        integer(int32), intent(in) :: bytes
        type(pmr_send_window), intent(out) :: window
        integer, optional, intent(out) :: ierr
        call send_window_create_owned_int64(connection, int(bytes, int64), window, ierr)
    end subroutine

    subroutine recv_window_create_owned_int64(connection, bytes, window, ierr)
        type(pmr_connection), intent(in) :: connection
        integer(int64), intent(in) :: bytes
        type(pmr_recv_window), intent(out) :: window
        integer, optional, intent(out) :: ierr
        character(len=*), parameter :: name = 'pmr_recv_window_create_owned'
        integer(c_int) :: rc
        rc = checked_bytes(bytes, name)
        if (rc == PMR_SUCCESS) then
            rc = c_recv_window_create(connection%handle, c_null_ptr, int(bytes, c_size_t), &
                                      window%handle)
        end if
        call finish(rc, ierr, name)
    end subroutine

    subroutine recv_window_create_owned_int32(connection, bytes, window, ierr)
        type(pmr_connection), intent(in) :: connection
        integer(int32), intent(in) :: bytes
        type(pmr_recv_window), intent(out) :: window
        integer, optional, intent(out) :: ierr
        call recv_window_create_owned_int64(connection, int(bytes, int64), window, ierr)
    end subroutine

    !> The window's memory, for c_f_pointer; c_null_ptr for a destroyed window.
    function pmr_send_window_data(window) result(data)
        type(pmr_send_window), intent(in) :: window
        type(c_ptr) :: data
        data = c_send_window_data(window%handle)
    end function

    function pmr_recv_window_data(window) result(data)
        type(pmr_recv_window), intent(in) :: window
        type(c_ptr) :: data
        data = c_recv_window_data(window%handle)
    end function

    subroutine pmr_send_window_size(window, bytes, ierr)
        type(pmr_send_window), intent(in) :: window
        integer(c_size_t), intent(out) :: bytes
        integer, optional, intent(out) :: ierr
        bytes = 0
        call finish(c_send_window_size(window%handle, bytes), ierr, 'pmr_send_window_size')
    end subroutine

    subroutine pmr_recv_window_size(window, bytes, ierr)
        type(pmr_recv_window), intent(in) :: window
        integer(c_size_t), intent(out) :: bytes
        integer, optional, intent(out) :: ierr
        bytes = 0
        call finish(c_recv_window_size(window%handle, bytes), ierr, 'pmr_recv_window_size')
    end subroutine

    subroutine pmr_send_window_init(window, ierr)
        type(pmr_send_window), intent(in) :: window
        integer, optional, intent(out) :: ierr
        call finish(c_send_window_init(window%handle), ierr, 'pmr_send_window_init')
    end subroutine

    subroutine send_window_post_int64(window, bytes, ierr)
        type(pmr_send_window), intent(in) :: window
        integer(int64), intent(in) :: bytes
        integer, optional, intent(out) :: ierr
        character(len=*), parameter :: name = 'pmr_send_window_post'
        integer(c_int) :: rc
        rc = checked_bytes(bytes, name)
        if (rc == PMR_SUCCESS) rc = c_send_window_post(window%handle, int(bytes, c_size_t))
        call finish(rc, ierr, name)
    end subroutine

    subroutine send_window_post_int32(window, bytes, ierr)
        type(pmr_send_window), intent(in) :: window
        integer(int32), intent(in) :: bytes
        integer, optional, intent(out) :: ierr
        call send_window_post_int64(window, int(bytes, int64), ierr)
    end subroutine

    subroutine pmr_send_window_wait(window, ierr)
        type(pmr_send_window), intent(in) :: window
        integer, optional, intent(out) :: ierr
        call finish(c_send_window_wait(window%handle), ierr, 'pmr_send_window_wait')
    end subroutine

    !> pmr_send_window_wait with its own deadline of `seconds` (> 0) instead of PMR_TIMEOUT.
    subroutine pmr_send_window_wait_timeout(window, seconds, ierr)
        type(pmr_send_window), intent(in) :: window
        real(real64), intent(in) :: seconds
        integer, optional, intent(out) :: ierr
        call finish(c_send_window_wait_timeout(window%handle, real(seconds, c_double)), ierr, &
                    'pmr_send_window_wait_timeout')
    end subroutine

    subroutine pmr_send_window_test(window, done, ierr)
        type(pmr_send_window), intent(in) :: window
        logical, intent(out) :: done
        integer, optional, intent(out) :: ierr
        integer(c_int) :: flag, rc
        flag = 0
        rc = c_send_window_test(window%handle, flag)
        done = flag /= 0
        call finish(rc, ierr, 'pmr_send_window_test')
    end subroutine

    subroutine pmr_send_window_destroy(window, ierr)
        type(pmr_send_window), intent(inout) :: window
        integer, optional, intent(out) :: ierr
        call finish(c_send_window_destroy(window%handle), ierr, 'pmr_send_window_destroy')
    end subroutine

    subroutine pmr_recv_window_init(window, ierr)
        type(pmr_recv_window), intent(in) :: window
        integer, optional, intent(out) :: ierr
        call finish(c_recv_window_init(window%handle), ierr, 'pmr_recv_window_init')
    end subroutine

    subroutine pmr_recv_window_post(window, ierr)
        type(pmr_recv_window), intent(in) :: window
        integer, optional, intent(out) :: ierr
        call finish(c_recv_window_post(window%handle), ierr, 'pmr_recv_window_post')
    end subroutine

    subroutine pmr_recv_window_wait(window, ierr)
        type(pmr_recv_window), intent(in) :: window
        integer, optional, intent(out) :: ierr
        call finish(c_recv_window_wait(window%handle), ierr, 'pmr_recv_window_wait')
    end subroutine

    !> pmr_recv_window_wait with its own deadline of `seconds` (> 0) instead of PMR_TIMEOUT.
    subroutine pmr_recv_window_wait_timeout(window, seconds, ierr)
        type(pmr_recv_window), intent(in) :: window
        real(real64), intent(in) :: seconds
        integer, optional, intent(out) :: ierr
        call finish(c_recv_window_wait_timeout(window%handle, real(seconds, c_double)), ierr, &
                    'pmr_recv_window_wait_timeout')
    end subroutine

    subroutine pmr_recv_window_test(window, done, ierr)
        type(pmr_recv_window), intent(in) :: window
        logical, intent(out) :: done
        integer, optional, intent(out) :: ierr
        integer(c_int) :: flag, rc
        flag = 0
        rc = c_recv_window_test(window%handle, flag)
        done = flag /= 0
        call finish(rc, ierr, 'pmr_recv_window_test')
    end subroutine

    !> Waits until the posted operations of all `sends` and `recvs` have completed, progressing
    !> them together with one PMR_TIMEOUT deadline (pmr_wait_all of pmr.h); either array may be
    !> empty. Every window must be posted.
    subroutine pmr_wait_all(sends, recvs, ierr)
        type(pmr_send_window), intent(in) :: sends(:)
        type(pmr_recv_window), intent(in) :: recvs(:)
        integer, optional, intent(out) :: ierr
        type(c_ptr) :: s(max(size(sends), 1)), r(max(size(recvs), 1))
        call handles_of(sends, recvs, s, r)
        call finish(c_wait_all(s, int(size(sends), c_size_t), r, int(size(recvs), c_size_t)), &
                    ierr, 'pmr_wait_all')
    end subroutine

    !> pmr_wait_all with its own deadline of `seconds` (> 0) instead of PMR_TIMEOUT.
    subroutine pmr_wait_all_timeout(sends, recvs, seconds, ierr)
        type(pmr_send_window), intent(in) :: sends(:)
        type(pmr_recv_window), intent(in) :: recvs(:)
        real(real64), intent(in) :: seconds
        integer, optional, intent(out) :: ierr
        type(c_ptr) :: s(max(size(sends), 1)), r(max(size(recvs), 1))
        call handles_of(sends, recvs, s, r)
        call finish(c_wait_all_timeout(s, int(size(sends), c_size_t), r, &
                                       int(size(recvs), c_size_t), real(seconds, c_double)), &
                    ierr, 'pmr_wait_all_timeout')
    end subroutine

    !> Non-blocking pmr_wait_all: `done` once every operation has completed (all windows are then
    !> ready for their next init); otherwise every window stays posted.
    subroutine pmr_test_all(sends, recvs, done, ierr)
        type(pmr_send_window), intent(in) :: sends(:)
        type(pmr_recv_window), intent(in) :: recvs(:)
        logical, intent(out) :: done
        integer, optional, intent(out) :: ierr
        type(c_ptr) :: s(max(size(sends), 1)), r(max(size(recvs), 1))
        integer(c_int) :: flag, rc
        call handles_of(sends, recvs, s, r)
        flag = 0
        rc = c_test_all(s, int(size(sends), c_size_t), r, int(size(recvs), c_size_t), flag)
        done = flag /= 0
        call finish(rc, ierr, 'pmr_test_all')
    end subroutine

    subroutine handles_of(sends, recvs, s, r)
        type(pmr_send_window), intent(in) :: sends(:)
        type(pmr_recv_window), intent(in) :: recvs(:)
        type(c_ptr), intent(out) :: s(:), r(:)
        integer :: i
        s = c_null_ptr
        r = c_null_ptr
        do i = 1, size(sends)
            s(i) = sends(i)%handle
        end do
        do i = 1, size(recvs)
            r(i) = recvs(i)%handle
        end do
    end subroutine

    !> Bytes delivered by the last completed transfer.
    subroutine pmr_recv_window_received_bytes(window, bytes, ierr)
        type(pmr_recv_window), intent(in) :: window
        integer(c_size_t), intent(out) :: bytes
        integer, optional, intent(out) :: ierr
        bytes = 0
        call finish(c_recv_window_received_bytes(window%handle, bytes), ierr, &
                    'pmr_recv_window_received_bytes')
    end subroutine

    subroutine pmr_recv_window_destroy(window, ierr)
        type(pmr_recv_window), intent(inout) :: window
        integer, optional, intent(out) :: ierr
        call finish(c_recv_window_destroy(window%handle), ierr, 'pmr_recv_window_destroy')
    end subroutine

    ! --- Cartesian grids --------------------------------------------------------------------------

    subroutine communicator_create_integer(comm, dims, periods, reorder, communicator, ierr)
        integer, intent(in) :: comm
        integer, intent(in) :: dims(:)
        logical, intent(in) :: periods(:)
        logical, intent(in) :: reorder
        type(pmr_communicator), intent(out) :: communicator
        integer, optional, intent(out) :: ierr
        character(len=*), parameter :: name = 'pmr_communicator_create'
        integer(c_int) :: c_dims(size(dims)), c_periods(size(dims)), c_reorder, rc
        character(len=16) :: counts
        if (size(periods) /= size(dims) .or. size(dims) == 0) then
            write (counts, '(i0, " and ", i0)') size(dims), size(periods)
            rc = fail(PMR_ERR_ARGUMENT, 'dims and periods have '//trim(counts)//' entries', name, &
                      'Give one extent and one periodicity per dimension, at least one dimension.')
        else
            c_dims = int(dims, c_int)
            c_periods = merge(1_c_int, 0_c_int, periods)
            c_reorder = merge(1_c_int, 0_c_int, reorder)
            rc = f_communicator_create(int(comm, c_int), int(size(dims), c_int), c_dims, c_periods, &
                                       c_reorder, communicator%handle)
        end if
        call finish(rc, ierr, name)
    end subroutine

    subroutine communicator_wrap_integer(comm, communicator, ierr)
        integer, intent(in) :: comm
        type(pmr_communicator), intent(out) :: communicator
        integer, optional, intent(out) :: ierr
        integer(c_int) :: none(1)
        none = 0
        call finish(f_communicator_create(int(comm, c_int), 0_c_int, none, none, 0_c_int, &
                                          communicator%handle), ierr, 'pmr_communicator_create')
    end subroutine

#ifdef PMR_HAVE_MPI_F08
    subroutine communicator_create_f08(comm, dims, periods, reorder, communicator, ierr)
        type(MPI_Comm), intent(in) :: comm
        integer, intent(in) :: dims(:)
        logical, intent(in) :: periods(:)
        logical, intent(in) :: reorder
        type(pmr_communicator), intent(out) :: communicator
        integer, optional, intent(out) :: ierr
        call communicator_create_integer(comm%MPI_VAL, dims, periods, reorder, communicator, ierr)
    end subroutine

    subroutine communicator_wrap_f08(comm, communicator, ierr)
        type(MPI_Comm), intent(in) :: comm
        type(pmr_communicator), intent(out) :: communicator
        integer, optional, intent(out) :: ierr
        call communicator_wrap_integer(comm%MPI_VAL, communicator, ierr)
    end subroutine
#endif

    !> Collective if the communicator owns a Cartesian grid.
    subroutine pmr_communicator_destroy(communicator, ierr)
        type(pmr_communicator), intent(inout) :: communicator
        integer, optional, intent(out) :: ierr
        call finish(c_communicator_destroy(communicator%handle), ierr, 'pmr_communicator_destroy')
    end subroutine

    subroutine communicator_comm_integer(communicator, comm, ierr)
        type(pmr_communicator), intent(in) :: communicator
        integer, intent(out) :: comm
        integer, optional, intent(out) :: ierr
        integer(c_int) :: handle, rc
        handle = 0
        rc = f_communicator_comm(communicator%handle, handle)
        comm = int(handle)
        call finish(rc, ierr, 'pmr_communicator_comm')
    end subroutine

#ifdef PMR_HAVE_MPI_F08
    subroutine communicator_comm_f08(communicator, comm, ierr)
        type(pmr_communicator), intent(in) :: communicator
        type(MPI_Comm), intent(out) :: comm
        integer, optional, intent(out) :: ierr
        call communicator_comm_integer(communicator, comm%MPI_VAL, ierr)
    end subroutine
#endif

    subroutine pmr_communicator_rank(communicator, rank, ierr)
        type(pmr_communicator), intent(in) :: communicator
        integer, intent(out) :: rank
        integer, optional, intent(out) :: ierr
        integer(c_int) :: value, rc
        value = -1
        rc = c_communicator_rank(communicator%handle, value)
        rank = int(value)
        call finish(rc, ierr, 'pmr_communicator_rank')
    end subroutine

    subroutine pmr_communicator_size(communicator, size, ierr)
        type(pmr_communicator), intent(in) :: communicator
        integer, intent(out) :: size
        integer, optional, intent(out) :: ierr
        integer(c_int) :: value, rc
        value = 0
        rc = c_communicator_size(communicator%handle, value)
        size = int(value)
        call finish(rc, ierr, 'pmr_communicator_size')
    end subroutine

    !> Number of grid dimensions (0 if not Cartesian).
    subroutine pmr_communicator_dimensions(communicator, ndims, ierr)
        type(pmr_communicator), intent(in) :: communicator
        integer, intent(out) :: ndims
        integer, optional, intent(out) :: ierr
        integer(c_int) :: value, rc
        value = 0
        rc = c_communicator_dimensions(communicator%handle, value)
        ndims = int(value)
        call finish(rc, ierr, 'pmr_communicator_dimensions')
    end subroutine

    !> Like MPI_Cart_get: extents, periodicity and own coordinates; each array is optional and
    !> receives min(size(array), number of dimensions) entries.
    subroutine pmr_communicator_grid(communicator, dims, periods, coords, ierr)
        type(pmr_communicator), intent(in) :: communicator
        integer, optional, intent(out) :: dims(:), coords(:)
        logical, optional, intent(out) :: periods(:)
        integer, optional, intent(out) :: ierr
        integer(c_int) :: n, rc
        integer(c_int), allocatable :: c_dims(:), c_periods(:), c_coords(:)
        integer :: m
        n = 0
        rc = c_communicator_dimensions(communicator%handle, n)
        if (rc == PMR_SUCCESS) then
            allocate (c_dims(max(n, 1)), c_periods(max(n, 1)), c_coords(max(n, 1)))
            rc = c_communicator_grid(communicator%handle, n, c_dims, c_periods, c_coords)
        end if
        if (rc == PMR_SUCCESS) then
            if (present(dims)) then
                m = min(size(dims), int(n))
                dims(1:m) = int(c_dims(1:m))
            end if
            if (present(periods)) then
                m = min(size(periods), int(n))
                periods(1:m) = c_periods(1:m) /= 0
            end if
            if (present(coords)) then
                m = min(size(coords), int(n))
                coords(1:m) = int(c_coords(1:m))
            end if
        end if
        call finish(rc, ierr, 'pmr_communicator_grid')
    end subroutine

    !> Rank of the neighbour in `dimension` (from 0) and `direction` (-1 or +1); MPI_PROC_NULL at
    !> a non-periodic border.
    subroutine pmr_communicator_neighbor(communicator, dimension, direction, rank, ierr)
        type(pmr_communicator), intent(in) :: communicator
        integer, intent(in) :: dimension, direction
        integer, intent(out) :: rank
        integer, optional, intent(out) :: ierr
        integer(c_int) :: value, rc
        value = -1
        rc = c_communicator_neighbor(communicator%handle, int(dimension, c_int), &
                                     int(direction, c_int), value)
        rank = int(value)
        call finish(rc, ierr, 'pmr_communicator_neighbor')
    end subroutine

    !> Connection to the neighbour in `dimension` and `direction`, with the direction tags of
    !> pmr::Communicator::target() plus `tag_offset` (see pmr.h).
    subroutine pmr_connection_create_neighbor(communicator, dimension, direction, tag_offset, &
                                              connection, ierr)
        type(pmr_communicator), intent(in) :: communicator
        integer, intent(in) :: dimension, direction, tag_offset
        type(pmr_connection), intent(out) :: connection
        integer, optional, intent(out) :: ierr
        call finish(c_connection_create_neighbor(communicator%handle, int(dimension, c_int), &
                                                 int(direction, c_int), int(tag_offset, c_int), &
                                                 connection%handle), &
                    ierr, 'pmr_connection_create_neighbor')
    end subroutine

end module pmr
