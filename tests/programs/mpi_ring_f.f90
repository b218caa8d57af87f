! mpi_ring_f: the Fortran twin of mpi_ring.c for strobe's tests. Three
! rounds: each rank sends 256 doubles (2048 bytes, tag 3) to the next rank
! and receives from the previous (explicit source and tag), then an
! MPI_ALLREDUCE of 4 doubles and an MPI_BARRIER. Rank 0 prints a checksum.
program mpi_ring_f
  use mpi
  implicit none
  integer :: ierr, rank, nranks, r, next, prev
  integer :: status(MPI_STATUS_SIZE)
  double precision :: out(256), in(256), s(4), total(4), checksum
  call MPI_INIT(ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPI_COMM_SIZE(MPI_COMM_WORLD, nranks, ierr)
  next = mod(rank + 1, nranks)
  prev = mod(rank + nranks - 1, nranks)
  checksum = 0
  do r = 1, 3
    out = rank * 100 + r
    if (mod(rank, 2) == 0) then
      call MPI_SEND(out, 256, MPI_DOUBLE_PRECISION, next, 3, MPI_COMM_WORLD, ierr)
      call MPI_RECV(in, 256, MPI_DOUBLE_PRECISION, prev, 3, MPI_COMM_WORLD, status, ierr)
    else
      call MPI_RECV(in, 256, MPI_DOUBLE_PRECISION, prev, 3, MPI_COMM_WORLD, status, ierr)
      call MPI_SEND(out, 256, MPI_DOUBLE_PRECISION, next, 3, MPI_COMM_WORLD, ierr)
    end if
    s = in(1:4)
    call MPI_ALLREDUCE(s, total, 4, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
    call MPI_BARRIER(MPI_COMM_WORLD, ierr)
    checksum = checksum + total(1)
  end do
  if (rank == 0) print '(A,I0,A,F10.1)', 'ranks=', nranks, ' checksum=', checksum
  call MPI_FINALIZE(ierr)
end program mpi_ring_f
