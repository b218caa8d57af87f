/* mpi_ring [ROUNDS]: an MPI program for strobe's tests. Each round: every
 * rank sends 1024 doubles (8192 bytes) to the next rank with MPI_Send and
 * receives from the previous with MPI_Recv (even ranks send first), then
 * the same ring the other way with MPI_Isend/MPI_Irecv and MPI_Waitall
 * (4096 bytes, tag 7, receive from MPI_ANY_SOURCE with MPI_STATUSES_IGNORE),
 * then an MPI_Allreduce of 16 doubles and an MPI_Barrier. The last rank
 * computes a little longer each round, so the others wait for it. Rank 0
 * prints the reduced checksum. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static double spin(long n) {
    volatile double x = 1.0;
    for (long i = 0; i < n; i++) x = x * 1.0000001 + 1e-9;
    return x;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int rounds = argc > 1 ? atoi(argv[1]) : 10;
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    double out[1024], in[1024], small_out[512], small_in[512], sum[16], total[16];
    double checksum = 0;
    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < 1024; i++) out[i] = rank * 1000 + r + i;
        if (rank % 2 == 0) {
            MPI_Send(out, 1024, MPI_DOUBLE, next, 1, MPI_COMM_WORLD);
            MPI_Recv(in, 1024, MPI_DOUBLE, prev, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Status st;
            MPI_Recv(in, 1024, MPI_DOUBLE, prev, 1, MPI_COMM_WORLD, &st);
            MPI_Send(out, 1024, MPI_DOUBLE, next, 1, MPI_COMM_WORLD);
        }
        for (int i = 0; i < 512; i++) small_out[i] = in[i];
        MPI_Request reqs[2];
        MPI_Irecv(small_in, 512, MPI_DOUBLE, MPI_ANY_SOURCE, 7, MPI_COMM_WORLD, &reqs[0]);
        MPI_Isend(small_out, 512, MPI_DOUBLE, prev, 7, MPI_COMM_WORLD, &reqs[1]);
        MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE);
        spin(rank == size - 1 ? 3000000 : 300000);
        for (int i = 0; i < 16; i++) sum[i] = small_in[i];
        MPI_Allreduce(sum, total, 16, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        MPI_Barrier(MPI_COMM_WORLD);
        checksum += total[0];
    }
    if (rank == 0) printf("ranks=%d rounds=%d checksum=%.1f\n", size, rounds, checksum);
    MPI_Finalize();
    return 0;
}
