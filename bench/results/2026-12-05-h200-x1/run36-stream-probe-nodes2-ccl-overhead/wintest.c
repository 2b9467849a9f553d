// Does MPI_Win_create work over 256 MiB of private and of /dev/shm memory here?
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <fcntl.h>
#include <unistd.h>
int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank; MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  size_t bytes = (size_t)256 << 20;
  for (int kind = 0; kind < 2; ++kind) {
    void* base;
    if (kind == 0) base = malloc(bytes);
    else {
      char name[64]; snprintf(name, sizeof name, "/dev/shm/wintest.%d", rank);
      int fd = open(name, O_CREAT | O_RDWR, 0600); ftruncate(fd, bytes);
      base = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0); close(fd); unlink(name);
    }
    MPI_Win win;
    int rc = MPI_Win_create(base, bytes, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    char text[MPI_MAX_ERROR_STRING]; int len = 0; text[0] = 0;
    if (rc != MPI_SUCCESS) MPI_Error_string(rc, text, &len);
    printf("rank %d %s: MPI_Win_create rc=%d %s\n", rank, kind ? "shm" : "malloc", rc, text);
    if (rc == MPI_SUCCESS) {
      long v = rank + 1, got = 0;
      MPI_Win_lock_all(0, win);
      MPI_Put(&v, 1, MPI_LONG, (rank + 1) % 2, 8 * rank, 1, MPI_LONG, win);
      MPI_Win_flush_all(win);
      MPI_Win_unlock_all(win);
      MPI_Barrier(MPI_COMM_WORLD);
      MPI_Win_free(&win);
    }
  }
  MPI_Finalize();
  return 0;
}
