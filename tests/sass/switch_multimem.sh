#!/usr/bin/env bash
# The SwitchChannel's multicast backend cannot run on the lent machines (no
# multicast objects may be created there), so its code is checked by what
# the compiler made of it: libplugboard.so's SwitchChannel allreduce
# kernels must hold a multimem load-reduce (SASS LDGMC) for each of the 7
# type/op pairs (f32 add; f16 and bf16 add with f32 accumulation, min,
# max), and switch_widths.cu's object (every reduce of the device API) each
# pair at 4, 8 and 16 bytes: 21 distinct LDGMC forms. cuobjdump and nvdisasm come from the CUDA toolkit or from PyPI's
# nvidia-cuda-cuobjdump / nvidia-cuda-nvdisasm in the project's .venv
# (tools/python-env.sh installs them). Exit 77 (skip) when neither has them.
set -euo pipefail
lib=$(realpath "$1")
widths=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
for dir in "${CUDA_HOME:-/usr/local/cuda}/bin" "$root"/.venv/lib/python3*/site-packages/nvidia/cu13/bin; do
  [ -x "$dir/cuobjdump" ] && [ -x "$dir/nvdisasm" ] && PATH="$dir:$PATH" && break
done
if ! command -v cuobjdump >/dev/null || ! command -v nvdisasm >/dev/null; then
  echo "skip: cuobjdump and nvdisasm not found (CUDA toolkit bin or .venv's nvidia-cuda-cuobjdump/nvdisasm)"
  exit 77
fi
# Only the cubins that hold the SwitchChannel kernels are disassembled: the
# whole library's SASS takes over a minute on CI's 2 cores.
cubins=$(mktemp -d)
trap 'rm -rf "$cubins"' EXIT
(cd "$cubins" && cuobjdump -xelf all "$lib" > /dev/null)
holders=$(grep -l switchAllReduceKernel "$cubins"/*.cubin || true)
sass=$(for c in $holders; do cuobjdump -sass "$c"; done)
kernels=$(grep -c "Function : .*switchAllReduceKernel" <<<"$sass" || true)
[ "$kernels" = 7 ] || { echo "FAIL: $kernels SwitchChannel allreduce kernels in $lib, expected 7"; exit 1; }
fail=0
for want in "LDGMC.E.ADD.F32x4" "LDGMC.E.F32ADD.F16x8" "LDGMC.E.MIN.F16x8" "LDGMC.E.MAX.F16x8" \
            "LDGMC.E.F32ADD.BF16x8" "LDGMC.E.MIN.BF16x8" "LDGMC.E.MAX.BF16x8"; do
  if grep -q "$want" <<<"$sass"; then echo "ok: $want"; else echo "FAIL: no $want in $lib"; fail=1; fi
done
forms=$(cuobjdump -sass "$widths" | grep -o "LDGMC[A-Z0-9.x]*" | sort -u)
echo "$forms"
count=$(grep -c . <<<"$forms" || true)
[ "$count" = 21 ] || { echo "FAIL: $count distinct LDGMC forms in $widths, expected 21 (7 type/op pairs x 3 widths)"; fail=1; }
exit $fail
