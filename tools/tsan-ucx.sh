#!/usr/bin/env bash
# ThreadSanitizer over the three ucx tests that tools/tsan.sh leaves out
# (their signal is UCX's own atomic, which TSan cannot see in the packaged
# library): builds Debian's UCX source with -fsanitize=thread into
# $UCX_TSAN_PREFIX (default /tmp/ucx-tsan), its x86-64 atomics as GCC
# builtins (UCX writes them in inline assembly, invisible to TSan even in an
# instrumented build), then runs the tests from the TSan tree against it.
# Not in CI: the UCX build takes several minutes. Needs root (deb-src,
# autotools). docs/reliability.md, session 44.
#   bash tools/tsan-ucx.sh
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
prefix=${UCX_TSAN_PREFIX:-/tmp/ucx-tsan}
work=${UCX_TSAN_WORK:-/tmp/ucx-tsan-src}
build=${PLUGBOARD_TSAN_BUILD_DIR:-build-tsan}
if [ ! -e "$prefix/lib/libucp.so" ]; then
  mkdir -p "$work" && cd "$work"
  src=/etc/apt/sources.list.d/plugboard-deb-src.sources
  printf 'Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: bookworm\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' > "$src"
  apt-get update -qq && apt-get install -y -qq autoconf automake libtool > /dev/null
  apt-get source -qq --download-only ucx
  rm -f "$src"
  tar xJf ucx_*.orig.tar.xz && cd ucx-*/
  cp -r debian.upstream debian
  cat > src/ucs/arch/x86_64/atomic.h <<'ATOMICS'
#ifndef UCS_X86_64_ATOMIC_H_
#define UCS_X86_64_ATOMIC_H_
/* UCX's locked instructions as GCC builtins, so ThreadSanitizer sees them. */
#define UCS_DEFINE_ATOMIC_ADD(w, s) static inline void ucs_atomic_add##w(volatile uint##w##_t *p, uint##w##_t v) \
    { __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
#define UCS_DEFINE_ATOMIC_FADD(w, s) static inline uint##w##_t ucs_atomic_fadd##w(volatile uint##w##_t *p, uint##w##_t v) \
    { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
#define UCS_DEFINE_ATOMIC_SWAP(w, s) static inline uint##w##_t ucs_atomic_swap##w(volatile uint##w##_t *p, uint##w##_t v) \
    { return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); }
#define UCS_DEFINE_ATOMIC_CSWAP(w, s) static inline uint##w##_t ucs_atomic_cswap##w(volatile uint##w##_t *p, \
    uint##w##_t c, uint##w##_t v) { __atomic_compare_exchange_n(p, &c, v, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST); return c; }
#define UCS_DEFINE_ATOMIC_BOOL_CSWAP(w, s) static inline uint##w##_t ucs_atomic_bool_cswap##w(volatile uint##w##_t *p, \
    uint##w##_t c, uint##w##_t v) { return ucs_atomic_cswap##w(p, c, v) == c; }
#endif
ATOMICS
  ./autogen.sh > autogen.log 2>&1
  CFLAGS="-O1 -g -fsanitize=thread -fno-omit-frame-pointer" CXXFLAGS="-O1 -g -fsanitize=thread" LDFLAGS="-fsanitize=thread" \
    ./configure --prefix="$prefix" --disable-numa --without-cuda --without-rocm --without-verbs --without-rdmacm \
    --without-knem --without-xpmem --without-java --without-go --disable-doxygen-doc --enable-mt --without-fuse3 \
    --disable-logging --disable-debug --disable-assertions --disable-params-check > configure.log 2>&1
  make -j"$(nproc)" > make.log 2>&1 && make install > install.log 2>&1
  cd "$repo"
fi
bash tools/sanitized-build.sh "$build" "-fsanitize=thread -fno-omit-frame-pointer"
supp=$(mktemp)
trap 'rm -f "$supp"' EXIT
# UCX's async thread reads its stop flag without atomics (UCX-internal).
{ cat tools/tsan-suppressions.txt; printf 'race:ucs_async_thread_func\nrace:ucs_async_thread_stop\n'; } > "$supp"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:atexit_sleep_ms=0:history_size=4:suppressions=$supp"
export UCX_MEM_MMAP_HOOK_MODE=none UCX_MEM_MALLOC_HOOKS=no UCX_MEM_EVENTS=no
export LD_LIBRARY_PATH="$prefix/lib" UCX_MODULE_DIR="$prefix/lib/ucx"
"$build/bin/plugboard_ucx_plugin_test" --gtest_filter='Conformance/TransportOrderingTest.SignalBecomesVisibleOnlyAfterEarlierWrites/ucx_rma_fence:Modes/UcxOrderingTest.PipelinedSignalsNeverOvertakeTheirWrites/rma_*'
