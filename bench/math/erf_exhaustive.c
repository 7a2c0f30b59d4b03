/* The inline f32 erf of codegen-llvm/src/math.rs, emulated operation for operation (fused
 * multiply-adds where it emits llvm.fmuladd, gradual underflow), against the C library's f64
 * erf over every f32 input:
 *
 *     gcc -O2 -march=native -ffp-contract=off -o erf_exhaustive bench/math/erf_exhaustive.c -lm
 *     ./erf_exhaustive            # all 2^32 inputs (minutes); or LO=hex HI=hex [STEP=n] ./...
 *
 * Prints the largest error in ulps of the exact value (an ulp of the f32 binade it rounds to,
 * 2^-149 for subnormals), and how many results are 0, 1, 2, ... f32 steps from
 * (float)erf((double)x). Keep the coefficients and the order of operations equal to math.rs's;
 * the compiled kernel gives this program's bits (see codegen-cpu/BENCH.md). */
#define _GNU_SOURCE
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const float C[] = {7.853861462e-05f, -8.010193706e-04f, 5.188327748e-03f, -2.685381286e-02f,
                          1.128358543e-01f, -3.761262596e-01f, 1.283791661e-01f};
static const float K[] = {2.677267184e-04f, -2.634596778e-03f, 1.426954102e-02f, -5.987283587e-02f,
                          -1.216362596e+00f, -3.807224274e+00f, -2.668416739e+00f};
static const float Q[] = {1.535330957e-04f, 1.339893905e-03f, 9.618437849e-03f,
                          5.550332367e-02f, 2.402264774e-01f, 6.931471825e-01f};

static float horner(const float *c, int n, float x) {
  float acc = c[0];
  for (int i = 1; i < n; i++) acc = fmaf(acc, x, c[i]);
  return acc;
}

static float bits_to_float(uint32_t b) { float f; memcpy(&f, &b, 4); return f; }
static uint32_t float_to_bits(float f) { uint32_t b; memcpy(&b, &f, 4); return b; }

/* F::one_minus_exp2 */
static float one_minus_exp2(float k) {
  const float magic = 12582912.0f;
  float z = k + magic;
  float r = k - (z - magic);
  float p = fmaf(r, horner(Q, 6, r), 1.0f);
  float minus_scale = bits_to_float((float_to_bits(z) << 23) + 0xbf800000u);
  return fmaf(p, minus_scale, 1.0f);
}

/* math::erf */
static float erf_inline(float x) {
  float a = fabsf(x);
  float near = fmaf(x, horner(C, 7, x * x), x);
  float ac = a > 4.0f ? 4.0f : a;
  float far = copysignf(one_minus_exp2(horner(K, 7, ac - 1.0f)), x);
  return a < 1.0f ? near : far;
}

int main(void) {
  uint32_t lo = getenv("LO") ? strtoul(getenv("LO"), 0, 16) : 0;
  uint64_t hi = getenv("HI") ? strtoull(getenv("HI"), 0, 16) : 0x100000000ull;
  uint32_t step = getenv("STEP") ? atoi(getenv("STEP")) : 1;
  double worst = 0;
  float worst_x = 0;
  uint64_t steps[4] = {0}, nan_ok = 0, nan_bad = 0;
  for (uint64_t b = lo; b < hi; b += step) {
    float x = bits_to_float((uint32_t)b);
    float g = erf_inline(x);
    double e = erf((double)x);
    float ef = (float)e;
    if (isnan(x)) {
      if (isnan(g)) nan_ok++; else nan_bad++;
      continue;
    }
    int ex;
    frexp(ef == 0 ? 1e-45 : ef, &ex);
    double ulp = fmax(ldexp(1.0, ex - 24), ldexp(1.0, -149));
    double err = fabs((double)g - e) / ulp;
    if (err > worst) { worst = err; worst_x = x; }
    int64_t d = (int64_t)(int32_t)float_to_bits(g) - (int64_t)(int32_t)float_to_bits(ef);
    if (signbit(g) != signbit(ef)) d = 3;
    d = d < 0 ? -d : d;
    steps[d > 3 ? 3 : d]++;
  }
  printf("max error %.4f ulp at x = %.9g\n", worst, worst_x);
  printf("f32 steps from (float)erf((double)x): 0: %llu, 1: %llu, 2: %llu, more: %llu\n",
         (unsigned long long)steps[0], (unsigned long long)steps[1],
         (unsigned long long)steps[2], (unsigned long long)steps[3]);
  printf("NaN inputs: %llu give NaN, %llu do not\n", (unsigned long long)nan_ok,
         (unsigned long long)nan_bad);
  const float special[] = {0.0f, -0.0f, INFINITY, -INFINITY, 4.0f, -4.0f};
  for (int i = 0; i < 6; i++)
    printf("erf(%g) = %g\n", special[i], erf_inline(special[i]));
  return nan_bad != 0 || steps[2] + steps[3] != 0;
}
