#!/usr/bin/env bash
# Run time of the kernels whose summation order bench/accuracy/long_sums.py measures, two axle
# binaries side by side: `axle bench` on each file of bench/accuracy/speed/, the two binaries
# interleaved for ROUNDS rounds (so machine noise falls on both), one thread (AXLE_CPU_THREADS=1),
# reused output buffers; prints each side's best median and best minimum in ms.
#
#   [ONLY=REGEX] bench/accuracy/speed.sh BEFORE_AXLE AFTER_AXLE [ROUNDS]
set -eu
before=$1 after=$2 rounds=${3:-3}
here=$(cd "$(dirname "$0")" && pwd)
export AXLE_CPU_THREADS=${AXLE_CPU_THREADS:-1}
printf '| kernel | before median | after median | before min | after min | after/before (min) |\n|---|---|---|---|---|---|\n'
for f in "$here"/speed/*.hlo; do
  [[ $(basename "$f" .hlo) =~ ${ONLY:-.} ]] || continue
  bmed=1e18 amed=1e18 bmin=1e18 amin=1e18
  for _ in $(seq "$rounds"); do
    for side in before after; do
      bin=$before; [ "$side" = after ] && bin=$after
      line=$("$bin" bench "$f" --repeat 10 --warmup 2 --outputs reused --no-cache 2>&1 | grep 'run (reused')
      med=$(sed -E 's/.*median ([0-9.]+) ms.*/\1/' <<<"$line")
      mn=$(sed -E 's/.*min ([0-9.]+) ms.*/\1/' <<<"$line")
      if [ "$side" = before ]; then
        bmed=$(python3 -c "print(min($bmed,$med))"); bmin=$(python3 -c "print(min($bmin,$mn))")
      else
        amed=$(python3 -c "print(min($amed,$med))"); amin=$(python3 -c "print(min($amin,$mn))")
      fi
    done
  done
  ratio=$(python3 -c "print(f'{$amin/$bmin:.2f}')")
  printf '| %s | %s | %s | %s | %s | %s |\n' "$(basename "$f" .hlo)" "$bmed" "$amed" "$bmin" "$amin" "$ratio"
done
