/* Open MPI's side of build/bench/ring_bench: the same sweep, the same output.
   mpicc -O2 bench/compare/mpi_collectives.c -o mpi_collectives && mpirun -np 4 ./mpi_collectives */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

/* kind 0 allreduce, 1 broadcast, 2 barrier, 3 allgather (bytes from each rank, out holds all) */
static double median_us(size_t bytes, int kind, float* v, float* out) {
  int batch = bytes <= 65536 ? 200 : bytes <= (1 << 22) ? 20 : 4;
  int count = (int)(bytes / sizeof(float));
  double times[5];
  for (int repeat = -1; repeat < 5; ++repeat) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < (repeat < 0 ? 1 : batch); ++i) {
      if (kind == 0) MPI_Allreduce(v, out, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      else if (kind == 1) MPI_Bcast(v, count, MPI_FLOAT, 0, MPI_COMM_WORLD);
      else if (kind == 3) MPI_Allgather(v, count, MPI_FLOAT, out, count, MPI_FLOAT, MPI_COMM_WORLD);
      else MPI_Barrier(MPI_COMM_WORLD);
    }
    if (repeat >= 0) times[repeat] = (MPI_Wtime() - t0) * 1e6 / batch;
  }
  qsort(times, 5, sizeof times[0], cmp);
  return times[2];
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  for (size_t bytes = 8; bytes <= ((size_t)64 << 20); bytes *= 8) {
    float* v = malloc(bytes);
    float* out = malloc(bytes * (size_t)size);
    for (size_t i = 0; i < bytes / sizeof(float); ++i) v[i] = 1.0f;
    double t = median_us(bytes, 0, v, out);
    if (rank == 0) printf("allreduce bytes=%zu us=%.2f\n", bytes, t);
    double b = median_us(bytes, 1, v, out);
    if (rank == 0) printf("broadcast bytes=%zu us=%.2f\n", bytes, b);
    double g = median_us(bytes, 3, v, out);
    if (rank == 0) printf("allgather bytes=%zu us=%.2f\n", bytes, g);
    fflush(stdout);
    free(v);
    free(out);
  }
  double t = median_us(0, 2, NULL, NULL);
  if (rank == 0) printf("barrier bytes=0 us=%.2f\n", t);
  MPI_Finalize();
  return 0;
}
