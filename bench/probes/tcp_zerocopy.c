// Probe for issue 13's "MSG_ZEROCOPY for large sends if it measures better"
// (docs/perf/2026-11-29-session41-one-stream-per-pair.md, part 4): one TCP
// stream, the sender sends `total` bytes in `chunk`-byte sends, with
// MSG_ZEROCOPY (mode z: SO_ZEROCOPY, completions reaped from the error
// queue before the buffer is sent again), by page reference (mode v:
// vmsplice into a 1 MiB pipe, splice into the socket; session 42) or plain
// copies (mode c). SPAN=bytes (both sides): the chunks walk a buffer that
// large instead of reusing one chunk's worth (cache-hot), as a collective
// on large buffers does.
//   gcc -O2 -o /tmp/zc bench/probes/tcp_zerocopy.c
//   /tmp/zc recv PORT &                        # prints nothing, exits at the end of the stream
//   /tmp/zc send ADDR PORT c|z|v CHUNK TOTAL   # prints GB/s
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/errqueue.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
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

/// SPAN from the environment (else one chunk), rounded up to whole chunks.
static size_t span(size_t chunk) {
  const char* text = getenv("SPAN");
  size_t n = text ? strtoull(text, 0, 10) : chunk;
  return (n + chunk - 1) / chunk * chunk;
}

static int receiver(int port) {
  int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
  setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  if (bind(l, (void*)&a, sizeof a) || listen(l, 1)) return perror("listen"), 1;
  int s = accept(l, 0, 0);
  const size_t chunk = 1 << 20, bytes = span(chunk);
  char* buf = aligned_alloc(4096, bytes);
  memset(buf, 1, bytes);
  for (size_t at = 0;;) {
    ssize_t n = recv(s, buf + at, chunk - at % chunk, 0);
    if (n <= 0) return 0;
    at = (at + (size_t)n) % bytes;
  }
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

/// Mode v: sends len bytes at p through the pipe by page reference.
static int spliceSend(int s, int pipefd[2], const char* p, size_t len) {
  while (len > 0) {
    struct iovec v = {(void*)p, len};
    ssize_t n = vmsplice(pipefd[1], &v, 1, 0);
    if (n < 0) return perror("vmsplice"), 1;
    for (ssize_t left = n; left > 0;) {
      ssize_t m = splice(pipefd[0], 0, s, 0, (size_t)left, 0);
      if (m < 0) return perror("splice"), 1;
      left -= m;
    }
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

static int sender(const char* addr, int port, char mode, size_t chunk, size_t total) {
  const int zero = mode == 'z';
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
  int pipefd[2];
  if (mode == 'v' && pipe(pipefd)) return perror("pipe"), 1;
  if (mode == 'v') fcntl(pipefd[1], F_SETPIPE_SZ, 1 << 20);
  const size_t bytes = span(chunk);
  char* base = aligned_alloc(4096, bytes);
  memset(base, 7, bytes);
  unsigned long issued = 0, completed = 0;
  double t0 = now();
  for (size_t sent = 0; sent < total;) {
    char* buf = base + sent % bytes;
    if (zero)  // the buffer is sent again: wait until the kernel let go of it
      while (completed < issued) {
        struct pollfd p = {s, 0, 0};
        poll(&p, 1, 100);
        completed += reap(s);
      }
    if (mode == 'v') {  // no reuse check: the bytes sent are never changed here
      if (spliceSend(s, pipefd, buf, chunk)) return 1;
      sent += chunk;
      continue;
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
  printf("%s chunk %zu span %zu: %.2f GB/s\n", zero ? "MSG_ZEROCOPY" : mode == 'v' ? "vmsplice" : "copy", chunk,
         bytes, total / (now() - t0) / 1e9);
  return 0;
}

int main(int argc, char** argv) {
  if (argc >= 3 && !strcmp(argv[1], "recv")) return receiver(atoi(argv[2]));
  if (argc >= 7 && !strcmp(argv[1], "send"))
    return sender(argv[2], atoi(argv[3]), argv[4][0], strtoull(argv[5], 0, 10), strtoull(argv[6], 0, 10));
  fprintf(stderr, "usage: [SPAN=bytes] %s recv PORT | send ADDR PORT c|z|v CHUNK TOTAL\n", argv[0]);
  return 2;
}
