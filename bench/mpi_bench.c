/* mpi_bench: times MPI_Allreduce (float sum) and MPI_Allgather (float) for
 * comparison with plugboard-perf. Not part of the Plugboard build;
 * bench/run-host-bench.sh compiles it with `mpicc -O2` and runs it as
 *   mpirun --allow-run-as-root --oversubscribe -np 4 --mca pml ob1 \
 *          --mca btl tcp,self --mca btl_tcp_if_include lo ./mpi_bench ...
 * so that Open MPI talks TCP over loopback (no shared memory), like
 * Plugboard's ethernet plugin.
 *
 * For every size -b..-e (times -f): warmup + timed iterations; the reported
 * time is each rank's mean time per iteration, averaged over ranks (as
 * plugboard-perf does). After timing, the output is poisoned, the collective
 * is run once more and every element is checked; any wrong value makes the
 * program exit non-zero.
 *
 * Size conventions follow plugboard-perf: allreduce size = count * 4 bytes;
 * allgather size = TOTAL gathered bytes (each rank sends size / nranks).
 * Sizes whose per-rank element count would be 0 are skipped.
 *
 * Output CSV (to --csv FILE, else stdout): library,collective,nranks,size_bytes,time_us
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  size_t min_bytes, max_bytes;
  double factor;
  int iters, warmup;
  int do_allreduce, do_allgather;
  const char* csv;
} options;

static void usage(int rank, int rc) {
  if (rank == 0)
    fprintf(rc ? stderr : stdout,
            "usage: mpi_bench [-b SIZE] [-e SIZE] [-f F] [-n ITERS] [-w WARMUP]\n"
            "                 [-C allreduce,allgather] [--csv FILE]\n"
            "  SIZE accepts K/M/G suffixes. Defaults: 8..1M, factor 2, 20 iters, 5 warmup.\n");
  MPI_Finalize();
  exit(rc);
}

static size_t parse_size(const char* s, int rank) {
  char* end = NULL;
  unsigned long long v = strtoull(s, &end, 10);
  if (end == s) usage(rank, 2);
  switch (*end) {
    case 'K': case 'k': v <<= 10; ++end; break;
    case 'M': case 'm': v <<= 20; ++end; break;
    case 'G': case 'g': v <<= 30; ++end; break;
    default: break;
  }
  if (*end) usage(rank, 2);
  return (size_t)v;
}

static int parse_int(const char* s, int lo, int rank) {
  char* end = NULL;
  long v = strtol(s, &end, 10);
  if (end == s || *end || v < lo) usage(rank, 2);
  return (int)v;
}

static options parse_options(int argc, char** argv, int rank) {
  options o = {8, 1 << 20, 2.0, 20, 5, 1, 1, NULL};
  for (int i = 1; i < argc; ++i) {
    const char* f = argv[i];
    if (!strcmp(f, "-h") || !strcmp(f, "--help")) usage(rank, 0);
    if (i + 1 >= argc) usage(rank, 2);
    const char* v = argv[++i];
    if (!strcmp(f, "-b")) o.min_bytes = parse_size(v, rank);
    else if (!strcmp(f, "-e")) o.max_bytes = parse_size(v, rank);
    else if (!strcmp(f, "-f")) { o.factor = strtod(v, NULL); if (o.factor <= 1.0) usage(rank, 2); }
    else if (!strcmp(f, "-n")) o.iters = parse_int(v, 1, rank);
    else if (!strcmp(f, "-w")) o.warmup = parse_int(v, 0, rank);
    else if (!strcmp(f, "--csv")) o.csv = v;
    else if (!strcmp(f, "-C")) {
      o.do_allreduce = strstr(v, "allreduce") != NULL;
      o.do_allgather = strstr(v, "allgather") != NULL;
      if (!o.do_allreduce && !o.do_allgather) usage(rank, 2);
    } else usage(rank, 2);
  }
  if (o.min_bytes == 0 || o.min_bytes > o.max_bytes) usage(rank, 2);
  return o;
}

static float allreduce_input(int rank, size_t i) { return (float)((rank + 1) * (int)(i % 13 + 1)); }
static float allgather_input(int rank, size_t i) { return (float)(rank * 4096 + (int)(i % 4096)); }

/* Times one collective at one size; writes mean time (us, over ranks) and wrong count (over ranks). */
static void measure(int allgather, size_t count, const options* o, double* time_us, double* wrong_out) {
  int rank, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  size_t out_count = allgather ? count * (size_t)n : count;
  float* in = malloc(count * sizeof(float));
  float* out = malloc(out_count * sizeof(float));
  if (!in || !out) { fprintf(stderr, "mpi_bench: out of memory\n"); MPI_Abort(MPI_COMM_WORLD, 1); }
  for (size_t i = 0; i < count; ++i) in[i] = allgather ? allgather_input(rank, i) : allreduce_input(rank, i);

#define RUN_ONCE()                                                                          \
  do {                                                                                      \
    if (allgather) MPI_Allgather(in, (int)count, MPI_FLOAT, out, (int)count, MPI_FLOAT, MPI_COMM_WORLD); \
    else MPI_Allreduce(in, out, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);             \
  } while (0)

  for (int i = 0; i < o->warmup; ++i) RUN_ONCE();
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  for (int i = 0; i < o->iters; ++i) RUN_ONCE();
  double mine[2];
  mine[0] = (MPI_Wtime() - t0) * 1e6 / o->iters;

  for (size_t i = 0; i < out_count; ++i) out[i] = -1.0f;
  RUN_ONCE();
#undef RUN_ONCE
  double wrong = 0;
  if (allgather) {
    for (int p = 0; p < n; ++p)
      for (size_t i = 0; i < count; ++i)
        if (out[(size_t)p * count + i] != allgather_input(p, i)) ++wrong;
  } else {
    const int rank_sum = n * (n + 1) / 2;
    for (size_t i = 0; i < count; ++i)
      if (out[i] != (float)(rank_sum * (int)(i % 13 + 1))) ++wrong;
  }
  mine[1] = wrong;
  double sums[2];
  MPI_Allreduce(mine, sums, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  *time_us = sums[0] / n;
  *wrong_out = sums[1];
  free(in);
  free(out);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  options o = parse_options(argc, argv, rank);

  /* CSV is built in memory on rank 0 and written at the end. */
  size_t cap = 1 << 16, len = 0;
  char* csv = malloc(cap);
  len += (size_t)snprintf(csv, cap, "library,collective,nranks,size_bytes,time_us\n");
  double total_wrong = 0;
  if (rank == 0) {
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int vlen = 0;
    MPI_Get_library_version(version, &vlen);
    char* nl = strchr(version, '\n');
    if (nl) *nl = 0;
    printf("# mpi_bench: %d ranks, float, iters %d, warmup %d (%s)\n", n, o.iters, o.warmup, version);
    printf("# %-10s %12s %12s %10s %8s\n", "collective", "size(B)", "count/rank", "time(us)", "#wrong");
    fflush(stdout);
  }
  for (int allgather = 0; allgather <= 1; ++allgather) {
    if (allgather ? !o.do_allgather : !o.do_allreduce) continue;
    const char* name = allgather ? "allgather" : "allreduce";
    size_t last = 0;
    for (size_t bytes = o.min_bytes; bytes <= o.max_bytes;) {
      size_t elems = bytes / sizeof(float);
      size_t count = allgather ? elems / (size_t)n : elems;
      size_t size = (allgather ? count * (size_t)n : count) * sizeof(float);
      size_t next = (size_t)((double)bytes * o.factor);
      bytes = next > bytes ? next : bytes + 1;
      if (count == 0 || size == last) continue;
      last = size;
      double us = 0, wrong = 0;
      measure(allgather, count, &o, &us, &wrong);
      total_wrong += wrong;
      if (rank == 0) {
        printf("  %-10s %12zu %12zu %10.2f %8.0f\n", name, size, count, us, wrong);
        fflush(stdout);
        if (len + 256 > cap) {
          cap *= 2;
          csv = realloc(csv, cap);
        }
        len += (size_t)snprintf(csv + len, cap - len, "openmpi,%s,%d,%zu,%.3f\n", name, n, size, us);
      }
    }
  }
  int rc = total_wrong == 0 ? 0 : 3;
  if (rank == 0) {
    printf("# wrong values: %.0f %s\n", total_wrong, rc == 0 ? "OK" : "FAILED");
    FILE* f = o.csv ? fopen(o.csv, "w") : stdout;
    if (!f || fwrite(csv, 1, len, f) != len) {
      fprintf(stderr, "mpi_bench: cannot write %s\n", o.csv ? o.csv : "stdout");
      rc = 1;
    }
    if (f && f != stdout) fclose(f);
    fflush(stdout);
  }
  free(csv);
  MPI_Finalize();
  return rc;
}
