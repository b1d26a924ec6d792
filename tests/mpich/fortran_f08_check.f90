! fortran_f08_check: MPI_Allreduce from Fortran through `use mpi_f08` reaches the library
! that defines MPI_Allreduce; the checks are in fortran_check_body.inc.
program fortran_f08_check
    use mpi_f08
    implicit none
    character(len=*), parameter :: program_name = 'fortran_f08_check'
    include 'fortran_check_body.inc'
end program
