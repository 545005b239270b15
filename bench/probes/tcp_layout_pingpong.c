// Probe for docs/perf/2026-11-29-session41-one-stream-per-pair.md: two processes
// exchange 8 B over loopback TCP, on one socket for both directions (mode 1)
// or a stream per direction (mode 2). SYM=1: both send, then both receive.
// Third argument 1: TCP_QUICKACK off after each read (as the ethernet plugin).
//   gcc -O2 -o /tmp/pingpong bench/probes/tcp_layout_pingpong.c && SYM=1 /tmp/pingpong 1 200000
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
static int listener(int *port) {
  int l = socket(AF_INET, SOCK_STREAM, 0); struct sockaddr_in a = {0}; a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK); bind(l, (void*)&a, sizeof a); listen(l, 4);
  socklen_t n = sizeof a; getsockname(l, (void*)&a, &n); *port = ntohs(a.sin_port); return l; }
static int conn(int port) { int s = socket(AF_INET, SOCK_STREAM, 0); struct sockaddr_in a = {0};
  a.sin_family = AF_INET; a.sin_addr.s_addr = htonl(INADDR_LOOPBACK); a.sin_port = htons(port);
  connect(s, (void*)&a, sizeof a); int one = 1; setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, 4); return s; }
static int acc(int l) { int s = accept(l, 0, 0); int one = 1; setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, 4); return s; }
static double now() { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static void loop(int tx, int rx, int first, int iters, int qa) {
  char b[8] = {0}; double t0 = now(); int zero = 0;
  for (int i = 0; i < iters; ++i) {
    if (first || getenv("SYM")) { send(tx, b, 8, 0); }
    int got = 0; while (got < 8) { int r = recv(rx, b + got, 8 - got, MSG_DONTWAIT); if (r == 0) exit(1); if (r > 0) got += r; }
    if (qa) setsockopt(rx, IPPROTO_TCP, TCP_QUICKACK, &zero, 4);
    if (!first && !getenv("SYM")) { send(tx, b, 8, 0); }
  }
  if (first) printf("%.2f us per round trip\n", (now() - t0) / iters * 1e6);
}
int main(int argc, char **argv) {
  int mode = atoi(argv[1]), iters = atoi(argv[2]), qa = argc > 3 ? atoi(argv[3]) : 0;
  int p1, p2; int l1 = listener(&p1), l2 = listener(&p2);
  pid_t pid = fork();
  if (pid == 0) { // child: rank 1
    int tx, rx;
    if (mode == 1) { tx = rx = acc(l1); }
    else { rx = acc(l1); tx = conn(p2); }
    loop(tx, rx, 0, iters, qa); return 0; }
  int tx, rx;
  if (mode == 1) { tx = rx = conn(p1); }
  else { tx = conn(p1); rx = acc(l2); }
  loop(tx, rx, 1, iters, qa); waitpid(pid, 0, 0); return 0; }
