#!/usr/bin/env bash
# Writes what a given `axle` binary makes of every corpus module and the 11 baseline programs
# into a folder, so two builds can be compared byte for byte (`diff -r`): the `opt` text after
# the cpu and gpu pipelines, the cpu backend's optimized LLVM IR, the nvptx backend's PTX, and
# (in `times.tsv`, not compared) each module's cpu compile time.
#
# Usage: bench/scripts/same-output.sh AXLE_BINARY OUT_DIR [SHARED_DIR]
set -uo pipefail
axle=${1:?axle binary}
out=${2:?output folder}
shared=${3:-${AXLE_SHARED:-$(dirname "$0")/../../../shared}}
mkdir -p "$out"
: >"$out/times.tsv"
files=("$shared"/corpus/*.hlo)
for b in conv3x3_nhwc_32x56x56x64 elementwise_chain_16M layernorm_8192x1024 matmul_1024 \
    matmul_2048 mlp3_b256_w1024 mlp3_train_step_b256_w1024 reduce_sum_64M softmax_4096x4096 \
    sort_1M transformer_block_s512_d512; do
    files+=("$shared/baseline/$b.hlo")
done
for f in "${files[@]}"; do
    n=$(basename "$f" .hlo)
    "$axle" --quiet --no-cache opt --pipeline cpu "$f" >"$out/$n.cpu.opt.hlo" 2>"$out/$n.cpu.opt.err"
    "$axle" --quiet --no-cache opt --pipeline gpu "$f" >"$out/$n.gpu.opt.hlo" 2>"$out/$n.gpu.opt.err"
    "$axle" --quiet --no-cache compile --emit llvm "$f" >"$out/$n.cpu.ll" 2>"$out/$n.cpu.ll.err"
    "$axle" --quiet --no-cache compile --backend nvptx --emit ptx "$f" >"$out/$n.ptx" 2>"$out/$n.ptx.err"
    t0=$(date +%s.%N)
    "$axle" --quiet --no-cache compile "$f" >/dev/null 2>&1
    t1=$(date +%s.%N)
    printf '%s\t%.3f\n' "$n" "$(echo "$t1 - $t0" | bc)" >>"$out/times.tsv"
done
