! fortran_f08_check: MPI_Allreduce from Fortran through `use mpi_f08` reaches the library
! that defines MPI_Allreduce (run-mpich-tests.sh checks gpurdma's verbose lines).
! Sums of C types the Fortran bindings name (MPI_INT, MPI_DOUBLE: gpurdma takes them)
! and of MPI_INTEGER (a Fortran type: handed to PMPI_Allreduce), each in place and not,
! every element checked. Prints "fortran_f08_check: N passed, M failed" on rank 0.
program fortran_f08_check
    use mpi_f08
    implicit none
    integer, parameter :: n = 1000
    integer :: ierr, rank, size, i, failed, passed, totals(2), ints(n), int_sums(n)
    double precision :: reals(n), real_sums(n)

    call MPI_Init(ierr)
    call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
    call MPI_Comm_size(MPI_COMM_WORLD, size, ierr)
    passed = 0
    failed = 0

    do i = 1, n
        ints(i) = rank * n + i
        reals(i) = dble(rank) + dble(i) * 0.5d0
    end do
    call MPI_Allreduce(ints, int_sums, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD, ierr)
    call check_ints('MPI_INT', ierr)
    call MPI_Allreduce(reals, real_sums, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, ierr)
    call check_reals('MPI_DOUBLE', ierr)
    int_sums = ints
    call MPI_Allreduce(MPI_IN_PLACE, int_sums, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD, ierr)
    call check_ints('MPI_INT in place', ierr)
    call MPI_Allreduce(ints, int_sums, n, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
    call check_ints('MPI_INTEGER', ierr)

    call MPI_Allreduce((/passed, failed/), totals, 2, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
    if (rank == 0) print '(a,i0,a,i0,a)', 'fortran_f08_check: ', totals(1), ' passed, ', totals(2), ' failed'
    call MPI_Finalize(ierr)
    if (totals(2) /= 0) stop 1

contains

    subroutine check_ints(what, code)
        character(len=*), intent(in) :: what
        integer, intent(in) :: code
        integer :: k
        do k = 1, n
            if (code /= MPI_SUCCESS .or. int_sums(k) /= n * size * (size - 1) / 2 + size * k) then
                print '(a,i0,a,a,a,i0)', 'FAIL [rank ', rank, '] ', what, ' element ', k
                failed = failed + 1
                return
            end if
        end do
        passed = passed + 1
    end subroutine

    subroutine check_reals(what, code)
        character(len=*), intent(in) :: what
        integer, intent(in) :: code
        integer :: k
        do k = 1, n
            if (code /= MPI_SUCCESS .or. real_sums(k) /= dble(size * (size - 1) / 2) + dble(size) * dble(k) * 0.5d0) then
                print '(a,i0,a,a,a,i0)', 'FAIL [rank ', rank, '] ', what, ' element ', k
                failed = failed + 1
                return
            end if
        end do
        passed = passed + 1
    end subroutine
end program
