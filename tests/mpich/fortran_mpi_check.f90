! fortran_mpi_check: MPI_Allreduce from Fortran through `use mpi` reaches the library
! that defines MPI_Allreduce; the checks are in fortran_check_body.inc.
program fortran_mpi_check
    use mpi
    implicit none
    character(len=*), parameter :: program_name = 'fortran_mpi_check'
    include 'fortran_check_body.inc'
end program
