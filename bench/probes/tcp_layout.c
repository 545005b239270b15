// Probe for docs/perf/2026-11-29-session41-one-stream-per-pair.md: two
// processes over loopback TCP (TCP_NODELAY, non-blocking receives in a
// polling loop), on one socket for both directions (LAYOUT 1) or a stream
// per direction (LAYOUT 2).
//   gcc -O2 -o /tmp/tcp_layout bench/probes/tcp_layout.c
//   /tmp/tcp_layout small LAYOUT ROUNDS [QUICKACK_OFF]   8 B each way a round
//       (SYM=1: both send, then both receive; QUICKACK_OFF 1: TCP_QUICKACK
//       off after each read, as the ethernet plugin asks)
//   /tmp/tcp_layout bulk LAYOUT ROUNDS BYTES             each side sends BYTES while receiving BYTES
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

static int listener(int* port) {
  int l = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(l, (void*)&a, sizeof a);
  listen(l, 4);
  socklen_t n = sizeof a;
  getsockname(l, (void*)&a, &n);
  *port = ntohs(a.sin_port);
  return l;
}

static int noDelay(int s) {
  int one = 1;
  setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return s;
}

static int connectTo(int port) {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  connect(s, (void*)&a, sizeof a);
  return noDelay(s);
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

/// 8 B rounds: the first side sends and the other answers (or, with SYM,
/// both send and then both receive).
static void small(int tx, int rx, int first, int rounds, int quickAckOff) {
  char b[8] = {0};
  const int sym = getenv("SYM") != NULL, zero = 0;
  double t0 = now();
  for (int i = 0; i < rounds; ++i) {
    if (first || sym) send(tx, b, 8, 0);
    int got = 0;
    while (got < 8) {
      int r = recv(rx, b + got, 8 - got, MSG_DONTWAIT);
      if (r == 0) exit(1);
      if (r > 0) got += r;
    }
    if (quickAckOff) setsockopt(rx, IPPROTO_TCP, TCP_QUICKACK, &zero, sizeof zero);
    if (!first && !sym) send(tx, b, 8, 0);
  }
  if (first) printf("small: %.2f us a round\n", (now() - t0) / rounds * 1e6);
}

/// Each side sends n bytes while receiving n, every round.
static void bulk(int tx, int rx, int first, int rounds, size_t n) {
  char *sb = malloc(n), *rb = malloc(n);
  memset(sb, 1, n);
  double t0 = now();
  for (int i = 0; i < rounds; ++i) {
    size_t sent = 0, got = 0;
    while (sent < n || got < n) {
      if (sent < n) {
        ssize_t r = send(tx, sb + sent, n - sent, MSG_DONTWAIT);
        if (r > 0) sent += r;
      }
      if (got < n) {
        ssize_t r = recv(rx, rb + got, n - got, MSG_DONTWAIT);
        if (r == 0) exit(1);
        if (r > 0) got += r;
      }
    }
  }
  if (first) printf("bulk %zu B: %.2f us a round\n", n, (now() - t0) / rounds * 1e6);
}

int main(int argc, char** argv) {
  if (argc < 4 || (strcmp(argv[1], "small") && strcmp(argv[1], "bulk")) || (!strcmp(argv[1], "bulk") && argc < 5)) {
    fprintf(stderr, "usage: %s small LAYOUT ROUNDS [QUICKACK_OFF] | bulk LAYOUT ROUNDS BYTES\n", argv[0]);
    return 2;
  }
  const int isBulk = !strcmp(argv[1], "bulk"), layout = atoi(argv[2]), rounds = atoi(argv[3]);
  const long arg = argc > 4 ? atol(argv[4]) : 0;
  int p1, p2;
  int l1 = listener(&p1), l2 = listener(&p2);
  const int first = fork() != 0;  // the parent prints
  int tx, rx;
  if (layout == 1) {
    tx = rx = first ? connectTo(p1) : noDelay(accept(l1, 0, 0));
  } else if (first) {
    tx = connectTo(p1);
    rx = noDelay(accept(l2, 0, 0));
  } else {
    rx = noDelay(accept(l1, 0, 0));
    tx = connectTo(p2);
  }
  if (isBulk)
    bulk(tx, rx, first, rounds, (size_t)arg);
  else
    small(tx, rx, first, rounds, (int)arg);
  if (first) wait(NULL);
  return 0;
}
