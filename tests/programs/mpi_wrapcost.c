/* mpi_wrapcost BLOCKS ITERATIONS: the cost of strobe's MPI wrappers above
 * the bare PMPI_ calls, in one process (rank 0 of a job; other ranks only
 * wait). Each block times ITERATIONS 8-byte messages of the process to
 * itself (an Isend, the Recv, the Wait: three calls), once through the
 * PMPI_ functions and once through the MPI_ ones (interleaved, which
 * first alternating from block to block), with a
 * pause after each block so a profiler's consumer keeps up; times are the
 * thread's CPU time, so other load on the machine counts little. Prints the
 * median over blocks of each, per call, in nanoseconds. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int blocks = argc > 1 ? atoi(argv[1]) : 21;
    long n = argc > 2 ? atol(argv[2]) : 2000;
    double *bare = calloc(blocks, sizeof(double)), *wrapped = calloc(blocks, sizeof(double));
    double x = 1, y = 0;
    MPI_Request req;
    struct timespec pause = {0, 50 * 1000 * 1000};
    if (rank == 0) {
        for (int b = 0; b < blocks; b++) {
            double t[3];
            for (int k = 0; k < 2; k++) {
                /* Odd blocks time the wrapped calls first. */
                int wrapped_now = (k == 0) == (b % 2 == 1);
                t[k] = now();
                for (long i = 0; i < n; i++) {
                    if (wrapped_now) {
                        MPI_Isend(&x, 1, MPI_DOUBLE, 0, 5, MPI_COMM_WORLD, &req);
                        MPI_Recv(&y, 1, MPI_DOUBLE, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                        MPI_Wait(&req, MPI_STATUS_IGNORE);
                    } else {
                        PMPI_Isend(&x, 1, MPI_DOUBLE, 0, 5, MPI_COMM_WORLD, &req);
                        PMPI_Recv(&y, 1, MPI_DOUBLE, 0, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                        PMPI_Wait(&req, MPI_STATUS_IGNORE);
                    }
                }
            }
            t[2] = now();
            double first = (t[1] - t[0]) / (3.0 * n), second = (t[2] - t[1]) / (3.0 * n);
            wrapped[b] = b % 2 == 1 ? first : second;
            bare[b] = b % 2 == 1 ? second : first;
            nanosleep(&pause, NULL);
        }
        qsort(bare, blocks, sizeof(double), cmp);
        qsort(wrapped, blocks, sizeof(double), cmp);
        printf("pmpi_ns=%.1f mpi_ns=%.1f\n", bare[blocks / 2], wrapped[blocks / 2]);
    }
    MPI_Finalize();
    return 0;
}
