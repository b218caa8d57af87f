/* mpi_pingpong ITERATIONS: ranks 0 and 1 bounce an 8-byte message
 * ITERATIONS times with MPI_Send/MPI_Recv (other ranks only join the
 * barriers); rank 0 prints the mean round trip in nanoseconds, timed
 * between two barriers with MPI_Wtime. For strobe-bench's cost of the MPI
 * wrappers. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    long n = argc > 1 ? atol(argv[1]) : 100000;
    double msg = 0;
    for (int warm = 0; warm < 2; warm++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (long i = 0; i < n; i++) {
            if (rank == 0) {
                MPI_Send(&msg, 1, MPI_DOUBLE, 1, 0, MPI_COMM_WORLD);
                MPI_Recv(&msg, 1, MPI_DOUBLE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else if (rank == 1) {
                MPI_Recv(&msg, 1, MPI_DOUBLE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(&msg, 1, MPI_DOUBLE, 0, 0, MPI_COMM_WORLD);
            }
        }
        double t1 = MPI_Wtime();
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0 && warm == 1) printf("round_trip_ns=%.1f\n", (t1 - t0) * 1e9 / n);
    }
    MPI_Finalize();
    return 0;
}
