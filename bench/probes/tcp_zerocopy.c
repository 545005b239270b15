// Probe for issue 13's "MSG_ZEROCOPY for large sends if it measures better"
// (docs/perf/2026-11-29-session41-one-stream-per-pair.md, part 4): one TCP
// stream, the sender sends `total` bytes in `chunk`-byte sends from one
// buffer, with MSG_ZEROCOPY (mode z: SO_ZEROCOPY, completions reaped from
// the error queue before the buffer is sent again) or plain copies (mode c).
//   gcc -O2 -o /tmp/zc bench/probes/tcp_zerocopy.c
//   /tmp/zc recv PORT &                      # prints nothing, exits at the end of the stream
//   /tmp/zc send ADDR PORT c|z CHUNK TOTAL   # prints GB/s
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <linux/errqueue.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef SO_ZEROCOPY
#define SO_ZEROCOPY 60
#endif
#ifndef MSG_ZEROCOPY
#define MSG_ZEROCOPY 0x4000000
#endif

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static int receiver(int port) {
  int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  if (bind(l, (void*)&a, sizeof a) || listen(l, 1)) return perror("listen"), 1;
  int s = accept(l, 0, 0);
  static char buf[1 << 20];
  while (recv(s, buf, sizeof buf, 0) > 0) {
  }
  return 0;
}

/// Reads zerocopy completions; returns how many sends they cover.
static unsigned long reap(int s) {
  unsigned long done = 0;
  for (;;) {
    char control[128];
    struct msghdr m = {0};
    m.msg_control = control;
    m.msg_controllen = sizeof control;
    if (recvmsg(s, &m, MSG_ERRQUEUE | MSG_DONTWAIT) < 0) return done;
    for (struct cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
      struct sock_extended_err* e = (void*)CMSG_DATA(c);
      if (e->ee_origin == SO_EE_ORIGIN_ZEROCOPY) done += e->ee_data - e->ee_info + 1;
    }
  }
}

static int sender(const char* addr, int port, int zero, size_t chunk, size_t total) {
  int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  inet_pton(AF_INET, addr, &a.sin_addr);
  for (int i = 0; connect(s, (void*)&a, sizeof a) != 0; ++i) {
    if (i > 200) return perror("connect"), 1;
    usleep(10000);
    close(s);
    s = socket(AF_INET, SOCK_STREAM, 0);
  }
  if (zero && setsockopt(s, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof one)) return perror("SO_ZEROCOPY"), 1;
  char* buf = malloc(chunk);
  memset(buf, 7, chunk);
  unsigned long issued = 0, completed = 0;
  double t0 = now();
  for (size_t sent = 0; sent < total;) {
    if (zero)  // the buffer is sent again: wait until the kernel let go of it
      while (completed < issued) {
        struct pollfd p = {s, 0, 0};
        poll(&p, 1, 100);
        completed += reap(s);
      }
    size_t off = 0;
    while (off < chunk) {
      ssize_t n = send(s, buf + off, chunk - off, zero ? MSG_ZEROCOPY : 0);
      if (n < 0) return perror("send"), 1;
      off += n;
      issued += zero ? 1 : 0;
    }
    sent += chunk;
  }
  shutdown(s, SHUT_WR);
  char c;
  while (recv(s, &c, 1, 0) > 0) {
  }
  printf("%s chunk %zu: %.2f GB/s\n", zero ? "MSG_ZEROCOPY" : "copy", chunk, total / (now() - t0) / 1e9);
  return 0;
}

int main(int argc, char** argv) {
  if (argc >= 3 && !strcmp(argv[1], "recv")) return receiver(atoi(argv[2]));
  if (argc >= 7 && !strcmp(argv[1], "send"))
    return sender(argv[2], atoi(argv[3]), argv[4][0] == 'z', strtoull(argv[5], 0, 10), strtoull(argv[6], 0, 10));
  fprintf(stderr, "usage: %s recv PORT | send ADDR PORT c|z CHUNK TOTAL\n", argv[0]);
  return 2;
}
