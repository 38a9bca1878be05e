// LDP, MBP, record-law ABP, eps_unif and eps_bel of a batch of float32 mechanisms: the same
// computation as jaxpriv.kernels.fused.record_levels_minor, written by hand for the CPU.
//
// Why by hand: XLA:CPU's code for that kernel spends ~1,500 cycles on an n = m = 8 mechanism;
// its fusion and vectorization choices, not the arithmetic, set that floor (benchmarks/README.md).
// Here mechanisms go through in blocks of kLanes, each quantity held as one GCC vector of
// kLanes floats (one lane per mechanism: every loop over secrets or outputs is a SIMD operation
// across mechanisms), exp/log are branch-free polynomials on those vectors, and the JS terms
// that need a log (|t| > 1/4, ~14% at n = m = 8 but present in 4 of 5 vectors) are compacted
// and evaluated together.
//
// Every step mirrors record_levels_minor (same masks, same formulas), so the two agree to
// float32 rounding; tests/test_native.py holds them, and the float64 reference, side by side.

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

// Mechanisms per vector: one native SIMD register (GCC lowers wider generic vectors through
// memory: with 16 lanes on AVX2 the kernel ran 7× slower than with 8).
#if defined(__AVX512F__)
constexpr int kLanes = 16;
#elif defined(__AVX2__)
constexpr int kLanes = 8;
#else
constexpr int kLanes = 4;
#endif
typedef float vf __attribute__((vector_size(kLanes * sizeof(float))));
typedef int32_t vi __attribute__((vector_size(kLanes * sizeof(int32_t))));

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kLn2 = 0.693147180559945309f;
constexpr float kSmallest = 1.17549435e-38f;  // the smallest normal float
// √6/2¹⁶ rounded to float32 (jaxpriv.kernels.samplers.TRIANGULAR_SCALE)
constexpr float kTriangularScale = static_cast<float>(2.449489742783178098 / 65536.0);

inline vf splat(float x) { return vf{} + x; }
inline vf larger(vf a, vf b) { return a < b ? b : a; }
inline vf smaller(vf a, vf b) { return b < a ? b : a; }
inline vf magnitude(vf a) { return (vf)((vi)a & 0x7fffffff); }
inline vf as_float(vi a) { return (vf)a; }

// e^x for x <= 88 (the kernel only exponentiates log-probabilities); -inf and x < -87 give 0.
// Cephes expf: x = k·ln2 + r, |r| <= ln2/2, e^r by a degree-7 polynomial; about 1 ulp.
inline vf exp_bounded(vf x) {
  const vi zero = !(x >= -87.0f);
  x = zero ? splat(0.0f) : smaller(x, splat(88.0f));
  const vf shifter = splat(12582912.0f);  // 1.5·2^23: adding it rounds to an integer
  const vf k = (x * 1.44269504088896341f + shifter) - shifter;
  vf r = x - k * 0.693359375f;
  r = r - k * -2.12194440e-4f;
  vf p = splat(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const vf scale = as_float((__builtin_convertvector(k, vi) + 127) << 23);
  return zero ? splat(0.0f) : p * scale;
}

// log x for finite x > 0 (subnormals included). Cephes logf: x = f·2^e with f in
// [√½, √2), log f by a degree-9 polynomial in f − 1; about 1 ulp. kNormal: the caller knows
// x >= the smallest normal float (the sampler's logs), and the same bits come without the
// subnormal case's four operations.
template <bool kNormal = false>
inline vf log_positive(vf x) {
  vi subnormal{};
  if (!kNormal) {
    subnormal = x < kSmallest;
    x = subnormal ? x * 8388608.0f : x;
  }
  const vi u = (vi)x;
  vf e = __builtin_convertvector(((u >> 23) & 0xff) - 126, vf);
  if (!kNormal) e = e - (subnormal ? splat(23.0f) : splat(0.0f));
  vf f = as_float((u & 0x007fffff) | 0x3f000000);  // in [0.5, 1)
  const vi low = f < 0.707106781186547524f;
  e = low ? e - 1.0f : e;
  f = (low ? f + f : f) - 1.0f;
  const vf z = f * f;
  vf p = splat(7.0376836292e-2f);
  p = p * f - 1.1514610310e-1f;
  p = p * f + 1.1676998740e-1f;
  p = p * f - 1.2420140846e-1f;
  p = p * f + 1.4249322787e-1f;
  p = p * f - 1.6668057665e-1f;
  p = p * f + 2.0000714765e-1f;
  p = p * f - 2.4999993993e-1f;
  p = p * f + 3.3333331174e-1f;
  vf y = f * z * p;
  y = y + e * -2.12194440e-4f;
  y = y - 0.5f * z;
  return f + y + e * 0.693359375f;
}

// JS terms are ¼·(P+Q)·g(t), t = (P−Q)/(P+Q) (jaxpriv.core.divergences.js_terms_fast), with
// g(t) = (1+t)·log(1+t) + (1−t)·log(1−t): from its series for u = t² <= 1/16 ...
inline vf quarter_small_gap(vf u) {  // g/4 = Σ_k u^k / (4k(2k−1)), k = 1..6 (the ¼ is exact)
  vf series = splat(0.25f / 66.0f);
  series = series * u + 0.25f / 45.0f;
  series = series * u + 0.25f / 28.0f;
  series = series * u + 0.25f / 15.0f;
  series = series * u + 0.25f / 6.0f;
  series = series * u + 0.25f;
  return u * series;
}

// ... and beyond it, for a = |t| in (1/4, 1]: (1+a)·log(1+a) is a degree-7 polynomial in
// a − 5/8 (Chebyshev fit, error 6e-9, below float32 rounding), (1−a)·log(1−a) a log.
inline vf large_gap(vf a) {
  const vf x = a - 0.625f;
  vf p = splat(-1.3826630125e-03f);
  p = p * x + 3.1056290904e-03f;
  p = p * x - 7.1616491537e-03f;
  p = p * x + 1.9406931411e-02f;
  p = p * x - 6.3116696947e-02f;
  p = p * x + 3.0769265519e-01f;
  p = p * x + 1.4855078189e+00f;
  p = p * x + 7.8895019928e-01f;
  const vf rest = 1.0f - a;
  const vi some = rest > 0.0f;
  return p + (some ? rest * log_positive(some ? rest : splat(1.0f)) : splat(0.0f));
}

#if defined(__AVX2__) && !defined(__AVX512F__)
// For each 8-bit mask, the indices of its set bits, in order (the rest 0).
struct CompressTable {
  CompressTable() {
    for (int bits = 0; bits < 256; ++bits) {
      int next = 0;
      for (int lane = 0; lane < 8; ++lane) order[bits][lane] = 0;
      for (int lane = 0; lane < 8; ++lane)
        if (bits & (1 << lane)) order[bits][next++] = lane;
    }
  }
  int32_t order[256][8];
};
#endif

// Appends the lanes where `keep` is set to the lists (which need kLanes − 1 spare slots: the
// vector path stores whole vectors). Returns how many were appended.
inline int compact(vi keep, vf a, vf total, int32_t tag, float* list_a, float* list_total,
                   int32_t* list_tag) {
#if defined(__AVX512F__)
  static_assert(kLanes == 16, "one AVX-512 vector per block");
  const __mmask16 mask = _mm512_test_epi32_mask((__m512i)keep, (__m512i)keep);
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  // Compress in registers and store whole vectors: compress-to-memory is microcoded on AMD.
  _mm512_storeu_ps(list_a, _mm512_maskz_compress_ps(mask, (__m512)a));
  _mm512_storeu_ps(list_total, _mm512_maskz_compress_ps(mask, (__m512)total));
  _mm512_storeu_si512(list_tag, _mm512_maskz_compress_epi32(
                                    mask, _mm512_add_epi32(lane, _mm512_set1_epi32(tag))));
  return __builtin_popcount(static_cast<unsigned>(mask));
#elif defined(__AVX2__)
  // Two halves of 8: the set lanes' indices from a table by mask, then one permute each.
  static const CompressTable table;
  int appended = 0;
  for (int half = 0; half < kLanes; half += 8) {
    __m256 keep_half, a_half, total_half;
    std::memcpy(&keep_half, reinterpret_cast<const float*>(&keep) + half, sizeof keep_half);
    std::memcpy(&a_half, reinterpret_cast<const float*>(&a) + half, sizeof a_half);
    std::memcpy(&total_half, reinterpret_cast<const float*>(&total) + half, sizeof total_half);
    const int bits = _mm256_movemask_ps(keep_half);
    const __m256i order = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(table.order[bits]));
    _mm256_storeu_ps(list_a + appended, _mm256_permutevar8x32_ps(a_half, order));
    _mm256_storeu_ps(list_total + appended, _mm256_permutevar8x32_ps(total_half, order));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(list_tag + appended),
                        _mm256_add_epi32(order, _mm256_set1_epi32(tag + half)));
    appended += __builtin_popcount(static_cast<unsigned>(bits));
  }
  return appended;
#else
  int appended = 0;
  for (int j = 0; j < kLanes; ++j) {
    if (!keep[j]) continue;
    list_a[appended] = a[j];
    list_total[appended] = total[j];
    list_tag[appended] = tag + j;
    ++appended;
  }
  return appended;
#endif
}

#if defined(__AVX2__) && !defined(__AVX512F__)
// rows[j] (entries k..k+7 of mechanism j) → rows[q] (entry k+q of mechanisms 0..7). The same
// ladder as transpose16 in 256-bit registers; against scalar copies it is worth 5–15% of the
// AVX2 kernel (4.8e6 vs 4.1–4.6e6/s on one core at n = m = 8).
inline void transpose8(__m256 r[8]) {
  __m256 t[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 2; ++i) {
    r[4 * i + 0] = _mm256_shuffle_ps(t[4 * i + 0], t[4 * i + 2], 0x44);
    r[4 * i + 1] = _mm256_shuffle_ps(t[4 * i + 0], t[4 * i + 2], 0xEE);
    r[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    r[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
  }
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm256_permute2f128_ps(r[i], r[i + 4], 0x20);
    t[i + 4] = _mm256_permute2f128_ps(r[i], r[i + 4], 0x31);
  }
  for (int i = 0; i < 8; ++i) r[i] = t[i];
}
#endif

#if defined(__AVX512F__)
// rows[j] (entries k..k+15 of mechanism j) → rows[q] (entry k+q of mechanisms 0..15).
inline void transpose16(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {
    r[4 * i + 0] = _mm512_shuffle_ps(t[4 * i + 0], t[4 * i + 2], 0x44);
    r[4 * i + 1] = _mm512_shuffle_ps(t[4 * i + 0], t[4 * i + 2], 0xEE);
    r[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    r[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
  }
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0x88);
    t[i + 4] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0xdd);
    t[i + 8] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0x88);
    t[i + 12] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0xdd);
  }
  for (int i = 0; i < 8; ++i) {
    r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
    r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xdd);
  }
}
#endif

struct Scratch {
  Scratch(int n, int m)
      : log_K(n * m), scaled(n * m), deviation(n * m), shift(n * m), log_prior(n),
        log_belief(n), prior(n), belief(n), prior_plus_belief(n), prior_minus_belief(n), js(n),
        list_a((n * n + 1) * kLanes), list_total((n * n + 1) * kLanes),
        list_tag((n * n + 1) * kLanes) {}
  std::vector<vf> log_K, scaled, deviation, shift, log_prior, log_belief, prior, belief,
      prior_plus_belief, prior_minus_belief, js;
  std::vector<float> list_a, list_total;
  std::vector<int32_t> list_tag;
};

struct Levels {
  float* ldp;
  float* mbp;
  float* abp;
  float* eps_unif;
  float* eps_bel;
};

// Transposes mechanisms first .. first + kLanes − 1 into lane vectors (those past `count` are
// uniform fillers, computed but not written).
void load(const float* log_K, const float* log_prior, const float* log_belief, int64_t first,
          int64_t count, int n, int m, Scratch& s) {
  const int nm = n * m;
  float* __restrict K = reinterpret_cast<float*>(s.log_K.data());
  float* __restrict prior = reinterpret_cast<float*>(s.log_prior.data());
  float* __restrict belief = reinterpret_cast<float*>(s.log_belief.data());
  if (first + kLanes <= count) {
    const float* __restrict K_in = log_K + first * nm;
    int k = 0;
#if defined(__AVX512F__)
    for (; k + kLanes <= nm; k += kLanes) {
      __m512 rows[kLanes];
      for (int j = 0; j < kLanes; ++j) rows[j] = _mm512_loadu_ps(K_in + j * nm + k);
      transpose16(rows);
      for (int q = 0; q < kLanes; ++q) _mm512_store_ps(K + (k + q) * kLanes, rows[q]);
    }
#elif defined(__AVX2__)
    for (; k + 8 <= nm; k += 8)
      for (int group = 0; group < kLanes; group += 8) {
        __m256 rows[8];
        for (int j = 0; j < 8; ++j) rows[j] = _mm256_loadu_ps(K_in + (group + j) * nm + k);
        transpose8(rows);
        for (int q = 0; q < 8; ++q) _mm256_store_ps(K + (k + q) * kLanes + group, rows[q]);
      }
#endif
    for (; k < nm; ++k)
      for (int j = 0; j < kLanes; ++j) K[k * kLanes + j] = K_in[j * nm + k];
    for (int d = 0; d < n; ++d)
      for (int j = 0; j < kLanes; ++j) {
        prior[d * kLanes + j] = log_prior[(first + j) * n + d];
        belief[d * kLanes + j] = log_belief[(first + j) * n + d];
      }
    return;
  }
  const float row_filler = -std::log(static_cast<float>(m));
  const float prior_filler = -std::log(static_cast<float>(n));
  for (int j = 0; j < kLanes; ++j) {
    const int64_t i = first + j;
    const bool real = i < count;
    for (int k = 0; k < nm; ++k) K[k * kLanes + j] = real ? log_K[i * nm + k] : row_filler;
    for (int d = 0; d < n; ++d) {
      prior[d * kLanes + j] = real ? log_prior[i * n + d] : prior_filler;
      belief[d * kLanes + j] = real ? log_belief[i * n + d] : prior_filler;
    }
  }
}

// kN, kM > 0 fix n and m at compile time (the loops over secrets and outputs unroll, and a
// row of Y stays in registers through the Gram products); 0 takes them from the arguments.
// kAbp = false skips ABP (Y, Z and the JS terms: most of the work) and writes 0 for it.
template <int kN, int kM, bool kAbp>
void block(const float* log_K_in, const float* log_prior_in, const float* log_belief_in,
           int64_t first, int64_t count, int n_given, int m_given, Scratch& s,
           const Levels& out) {
  const int n = kN > 0 ? kN : n_given;
  const int m = kM > 0 ? kM : m_given;
  load(log_K_in, log_prior_in, log_belief_in, first, count, n, m, s);
  const vf* lk = s.log_K.data();
  const vf* lp = s.log_prior.data();
  const vf* lb = s.log_belief.data();
  const vf zero = splat(0.0f), minus_inf = splat(-kInf);

  vf ldp = zero, mbp = zero;
  for (int d = 0; d < n; ++d) {
    s.prior[d] = exp_bounded(lp[d]);
    s.belief[d] = exp_bounded(lb[d]);
  }
  for (int w = 0; w < m; ++w) {
    vf top = lk[w], bottom = lk[w];
    for (int d = 1; d < n; ++d) {
      top = larger(top, lk[d * m + w]);
      bottom = smaller(bottom, lk[d * m + w]);
    }
    const vi occurs = top > minus_inf;
    ldp = larger(ldp, occurs ? top - bottom : zero);
    const vf safe_top = occurs ? top : zero;

    // Column-scaled mechanism R = K / max_d K; q = Σ_d π(d)·R[d,w], p(w) = e^{top}·q.
    vf q = zero;
    for (int d = 0; d < n; ++d) {
      s.scaled[d * m + w] = exp_bounded(lk[d * m + w] - safe_top);
      q = d == 0 ? s.prior[0] * s.scaled[w] : q + s.prior[d] * s.scaled[d * m + w];
    }
    const vi possible = q > 0.0f;
    const vf safe_q = possible ? q : splat(1.0f);
    const vf log_p = safe_top + log_positive(safe_q);
    for (int d = 0; d < n; ++d) {
      const vi counted = lp[d] > minus_inf;
      mbp = larger(mbp, (counted & possible) ? magnitude(lk[d * m + w] - log_p) : zero);
    }
    if (!kAbp) continue;
    const vf top_scale = exp_bounded(safe_top), inverse_q = 1.0f / safe_q;
    for (int d = 0; d < n; ++d) {
      // Y = K − p = e^{top}·(R − q); Z = P − π = π·(R − q)/q (the posterior shift).
      const vf centred = possible ? s.scaled[d * m + w] - q : zero;
      s.deviation[d * m + w] = top_scale * centred;
      s.shift[d * m + w] = s.prior[d] * centred * inverse_q;
    }
  }

  vf abp = zero;
  if (kAbp) {
  // F^A_{d*=a}(c) − π(c) = Σ_w Y[a,w]·Z[c,w]; JS(F^A_a ‖ belief) summed over c. Terms with
  // t² <= 1/16 are added in place; the others are listed and evaluated after the loop.
  for (int c = 0; c < n; ++c) {
    s.prior_plus_belief[c] = s.prior[c] + s.belief[c];
    s.prior_minus_belief[c] = s.prior[c] - s.belief[c];
  }
  int listed = 0;
  for (int a = 0; a < n; ++a) {
    vf js = zero;
    for (int c = 0; c < n; ++c) {
      vf delta = s.deviation[a * m] * s.shift[c * m];
      for (int w = 1; w < m; ++w) delta += s.deviation[a * m + w] * s.shift[c * m + w];
      const vf total = larger(s.prior_plus_belief[c] + delta, zero);
      // Where total = 0 the term is 0 whatever t is (it is a multiple of total), so t needs no
      // mask, only a divisor that is never 0; |t| > 1 (rounding) is clipped on the large path.
      const vf t = (delta + s.prior_minus_belief[c]) / larger(total, splat(kSmallest));
      const vf u = t * t;
      const vi small = u <= 0.0625f;
      js += total * quarter_small_gap(small ? u : zero);
      listed += compact(~small, magnitude(t), total, a * kLanes, s.list_a.data() + listed,
                        s.list_total.data() + listed, s.list_tag.data() + listed);
    }
    s.js[a] = js;
  }
  float* js = reinterpret_cast<float*>(s.js.data());
  for (int first_listed = 0; first_listed < listed; first_listed += kLanes) {
    vf a, total;
    std::memcpy(&a, s.list_a.data() + first_listed, sizeof a);
    std::memcpy(&total, s.list_total.data() + first_listed, sizeof total);
    // Lanes past `listed` hold stale finite values: computed, never added.
    const vf term = 0.25f * total * large_gap(smaller(a, splat(1.0f)));
    const int stop = listed - first_listed < kLanes ? listed - first_listed : kLanes;
    for (int j = 0; j < stop; ++j) js[s.list_tag[first_listed + j]] += term[j];
  }
  for (int a = 0; a < n; ++a) {
    const vf level = smaller(larger(s.js[a], zero), splat(kLn2));
    vf root;
    for (int j = 0; j < kLanes; ++j) root[j] = std::sqrt(level[j]);  // level >= 0
    abp = larger(abp, lp[a] > minus_inf ? root : zero);
  }
  }  // kAbp

  vf low = lp[0], high = lp[0], bel = zero;
  for (int d = 0; d < n; ++d) {
    low = smaller(low, lp[d]);
    high = larger(high, lp[d]);
    const vi both_zero = (lp[d] == minus_inf) & (lb[d] == minus_inf);
    bel = larger(bel, both_zero ? zero : magnitude(lb[d] - lp[d]));
  }
  const vf eps_unif = low > minus_inf ? high - low : splat(kInf);
  for (int j = 0; j < kLanes && first + j < count; ++j) {
    const int64_t i = first + j;
    out.ldp[i] = ldp[j];
    out.mbp[i] = mbp[j];
    out.abp[i] = abp[j];
    out.eps_unif[i] = eps_unif[j];
    out.eps_bel[i] = bel[j];
  }
}

ffi::Error RecordLevels(ffi::Buffer<ffi::F32> log_K, ffi::Buffer<ffi::F32> log_prior,
                        ffi::Buffer<ffi::F32> log_belief, ffi::ResultBuffer<ffi::F32> ldp,
                        ffi::ResultBuffer<ffi::F32> mbp, ffi::ResultBuffer<ffi::F32> abp,
                        ffi::ResultBuffer<ffi::F32> eps_unif, ffi::ResultBuffer<ffi::F32> eps_bel,
                        bool with_abp) {
  const auto dims = log_K.dimensions();
  if (dims.size() < 2) return ffi::Error::InvalidArgument("log_K must have shape (..., n, m)");
  const int n = static_cast<int>(dims[dims.size() - 2]);
  const int m = static_cast<int>(dims[dims.size() - 1]);
  if (n < 1 || m < 1) return ffi::Error::InvalidArgument("log_K needs n, m >= 1");
  const int64_t count = static_cast<int64_t>(log_K.element_count()) / (n * m);
  if (static_cast<int64_t>(log_prior.element_count()) != count * n ||
      static_cast<int64_t>(log_belief.element_count()) != count * n ||
      static_cast<int64_t>(ldp->element_count()) != count)
    return ffi::Error::InvalidArgument("log_prior, log_belief and the levels must match log_K");
  Scratch scratch(n, m);
  const Levels out{ldp->typed_data(), mbp->typed_data(), abp->typed_data(),
                   eps_unif->typed_data(), eps_bel->typed_data()};
  auto run = [&](auto kernel) {
    for (int64_t first = 0; first < count; first += kLanes)
      kernel(log_K.typed_data(), log_prior.typed_data(), log_belief.typed_data(), first, count,
             n, m, scratch, out);
  };
  if (n == 8 && m == 8) {
    with_abp ? run(block<8, 8, true>) : run(block<8, 8, false>);
  } else if (n == 4 && m == 4) {
    with_abp ? run(block<4, 4, true>) : run(block<4, 4, false>);
  } else if (n == 2 && m == 2) {
    with_abp ? run(block<2, 2, true>) : run(block<2, 2, false>);
  } else {
    with_abp ? run(block<0, 0, true>) : run(block<0, 0, false>);
  }
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxprivRecordLevels, RecordLevels,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Attr<bool>("with_abp"));

// ---------------------------------------------------------------------------------------------
// Database-level notions (jaxpriv.kernels.fused.database_levels, SPEC §2.6), written for the CPU:
// DP, BDP, the SP and BSP ratio spreads Λ, MP over 004's family 𝔻_* and whether BSP's games
// exist, for databases of r records with k values each (n = k^r rows in lexicographic order).
// One lane per mechanism, as above. For every nonempty set T of known positions the
// conditional log P[y | x_T] (004 eq. 19) is a log-sum-exp over the unknown records of the
// joint π(x)·K[x,y], minus that of the prior, exactly as jaxpriv.core.databases computes it (one
// shift by the group's maximum); BDP, MP, BSP and the games read it for every position i in T.
// ---------------------------------------------------------------------------------------------

namespace {

constexpr int kWantDp = 1, kWantConditionals = 2, kWantSp = 4, kWantBsp = 8, kWantGames = 16;

// Index tables of one layout: for each set T (a bit mask over the r positions, position 0 the
// most significant record), the partial database of every full one, and each kept position's
// stride in the partial index.
struct Layout {
  Layout(int k, int r, int def) : k(k), r(r), def(def) {
    n = 1;
    for (int j = 0; j < r; ++j) n *= k;
    const int sets = 1 << r;
    partial.assign(sets * n, 0);
    size.assign(sets, 1);
    stride.assign(sets * r, 0);
    for (int T = 1; T < sets; ++T) {
      int s = 1;
      for (int j = r - 1; j >= 0; --j)
        if (T >> j & 1) {
          stride[T * r + j] = s;
          s *= k;
        }
      size[T] = s;
      for (int x = 0; x < n; ++x) {
        int rest = x, c = 0;
        for (int j = r - 1; j >= 0; --j) {
          const int digit = rest % k;
          rest /= k;
          if (T >> j & 1) c += digit * stride[T * r + j];
        }
        partial[T * n + x] = c;
      }
    }
  }
  int k, r, def, n;
  std::vector<int> partial, size, stride;
};

// ``max − min`` over the groups of `a` along one position (entries c, c + s, …, c + (k−1)s, the
// base c with digit 0 there), per output; lanes where `mass` (if given) is off do not count
// for the minimum; a zero beside a positive entry is +inf. Returns the max over groups/outputs.
inline vf spread_along(const vf* a, const vi* mass, int entries, int m, int k, int s) {
  const vf zero = splat(0.0f), minus_inf = splat(-kInf), inf = splat(kInf);
  vf level = zero;
  for (int c = 0; c < entries; ++c) {
    if ((c / s) % k != 0) continue;
    for (int y = 0; y < m; ++y) {
      vf top = minus_inf, bottom = inf;
      for (int v = 0; v < k; ++v) {
        const int e = c + v * s;
        const vf x = a[e * m + y];
        top = larger(top, x);
        bottom = smaller(bottom, mass == nullptr ? x : (mass[e] ? x : inf));
      }
      const vi occurs = top > minus_inf;
      level = larger(level, occurs ? top - bottom : zero);
    }
  }
  return level;
}

// jaxpriv.core.databases._ratio_spread of a (entries × m) against its reset to ⊥ along the position
// of stride s, the max over outputs; `mass` (if given) marks the entries allowed on both sides.
inline vf ratio_spread(const vf* a, const vi* mass, int entries, int m, int k, int s, int def) {
  const vf zero = splat(0.0f), minus_inf = splat(-kInf), inf = splat(kInf);
  const vi none = vi{} == 0;  // all lanes on
  vf level = zero;
  for (int y = 0; y < m; ++y) {
    vf top = minus_inf, bottom = inf;
    vi has_a = vi{}, has_c = vi{};
    for (int c = 0; c < entries; ++c) {
      const int reset = c + (def - (c / s) % k) * s;
      const vi allowed = mass == nullptr ? none : (mass[c] & mass[reset]);
      const vf x = a[c * m + y], z = a[reset * m + y];
      const vi a_pos = (x > minus_inf) & allowed, c_pos = (z > minus_inf) & allowed;
      const vi both = a_pos & c_pos;
      const vf ratio = both ? x - z : (a_pos ? inf : minus_inf);
      const vi counted = a_pos | c_pos;
      top = larger(top, counted ? ratio : minus_inf);
      bottom = smaller(bottom, counted ? ratio : inf);
      has_a |= a_pos;
      has_c |= c_pos;
    }
    const vi game = has_a & has_c;
    const vf spread = game ? top - bottom : zero;
    level = larger(level, (has_a != has_c) ? inf : spread);
  }
  return level;
}

struct DatabaseScratch {
  DatabaseScratch(int n, int m)
      : scratch(n, m), top(n * m), total(n * m), cond(n * m), prior_top(n), prior_total(n),
        mass(n) {}
  Scratch scratch;
  std::vector<vf> top, total, cond, prior_top, prior_total;
  std::vector<vi> mass;
};

void database_block(const float* log_K_in, const float* log_prior_in, int64_t first,
                    int64_t count, int m, int want, const Layout& L, DatabaseScratch& s,
                    float* const* out) {
  const int n = L.n, k = L.k, r = L.r;
  load(log_K_in, log_prior_in, log_prior_in, first, count, n, m, s.scratch);
  const vf* lk = s.scratch.log_K.data();
  const vf* lp = s.scratch.log_prior.data();
  const vf zero = splat(0.0f), minus_inf = splat(-kInf);
  vf dp = zero, bdp = zero, sp = zero, bsp = zero, mp = zero;
  vi games = vi{} == 0;
  const int full = (1 << r) - 1;
  for (int i = 0; i < r && (want & (kWantDp | kWantSp)); ++i) {
    const int s_i = L.stride[full * r + i];  // position i: record x_{i+1}
    if (want & kWantDp) dp = larger(dp, spread_along(lk, nullptr, n, m, k, s_i));
    if (want & kWantSp) sp = larger(sp, ratio_spread(lk, nullptr, n, m, k, s_i, L.def));
  }
  if (want & (kWantConditionals | kWantBsp | kWantGames)) {
    for (int T = 1; T <= full; ++T) {
      const int entries = L.size[T];
      const int* partial = L.partial.data() + T * n;
      vf* cond = s.cond.data();
      vi* mass = s.mass.data();
      if (T == full) {  // nothing to marginalise: P[y | x] = K[x, y] where π(x) > 0
        for (int x = 0; x < n; ++x) {
          mass[x] = lp[x] > minus_inf;
          for (int y = 0; y < m; ++y) cond[x * m + y] = mass[x] ? lk[x * m + y] : minus_inf;
        }
      } else {
        // log Σ_rest e^{joint}: the group's maximum, then the sum of e^{joint − max}
        vf* top = s.top.data();
        vf* total = s.total.data();
        vf* prior_top = s.prior_top.data();
        vf* prior_total = s.prior_total.data();
        for (int c = 0; c < entries; ++c) {
          prior_top[c] = minus_inf;
          prior_total[c] = zero;
          for (int y = 0; y < m; ++y) {
            top[c * m + y] = minus_inf;
            total[c * m + y] = zero;
          }
        }
        for (int x = 0; x < n; ++x) {
          const int c = partial[x];
          prior_top[c] = larger(prior_top[c], lp[x]);
          for (int y = 0; y < m; ++y)
            top[c * m + y] = larger(top[c * m + y], lp[x] + lk[x * m + y]);
        }
        for (int x = 0; x < n; ++x) {
          const int c = partial[x];
          const vi finite = prior_top[c] > minus_inf;
          prior_total[c] += exp_bounded(lp[x] - (finite ? prior_top[c] : zero));
          for (int y = 0; y < m; ++y) {
            const vf t = top[c * m + y];
            total[c * m + y] += exp_bounded(lp[x] + lk[x * m + y] - (t > minus_inf ? t : zero));
          }
        }
        for (int c = 0; c < entries; ++c) {
          const vi has_mass = prior_top[c] > minus_inf;
          mass[c] = has_mass;
          const vf den = has_mass ? prior_top[c] + log_positive(has_mass ? prior_total[c]
                                                                          : splat(1.0f))
                                  : zero;
          for (int y = 0; y < m; ++y) {
            const vf t = top[c * m + y];
            const vi occurs = t > minus_inf;
            const vf num = t + log_positive(occurs ? total[c * m + y] : splat(1.0f));
            cond[c * m + y] = (has_mass & occurs) ? num - den : minus_inf;
          }
        }
      }
      for (int j = 0; j < r; ++j) {
        if (!(T >> j & 1)) continue;
        const int s_i = L.stride[T * r + j];
        if (want & kWantConditionals) {
          const vf spread = spread_along(cond, mass, entries, m, k, s_i);
          bdp = larger(bdp, spread);
          if (T != full) mp = larger(mp, spread);  // 𝔻_*: records left to the prior
        }
        if (want & kWantGames)
          for (int c = 0; c < entries; ++c) {
            const int reset = c + (L.def - (c / s_i) % k) * s_i;
            games &= ~mass[c] | mass[reset];
          }
        if (want & kWantBsp)
          bsp = larger(bsp, ratio_spread(cond, mass, entries, m, k, s_i, L.def));
      }
    }
  }
  mp = larger(mp, dp);
  const vf one = splat(1.0f);
  const vf games_level = games ? one : zero;
  for (int j = 0; j < kLanes && first + j < count; ++j) {
    const int64_t i = first + j;
    out[0][i] = dp[j];
    out[1][i] = bdp[j];
    out[2][i] = sp[j];
    out[3][i] = bsp[j];
    out[4][i] = mp[j];
    out[5][i] = games_level[j];
  }
}

ffi::Error DatabaseLevels(ffi::Buffer<ffi::F32> log_K, ffi::Buffer<ffi::F32> log_prior,
                          ffi::ResultBuffer<ffi::F32> dp, ffi::ResultBuffer<ffi::F32> bdp,
                          ffi::ResultBuffer<ffi::F32> sp, ffi::ResultBuffer<ffi::F32> bsp,
                          ffi::ResultBuffer<ffi::F32> mp, ffi::ResultBuffer<ffi::F32> games,
                          int32_t k, int32_t r, int32_t def, int32_t want) {
  const auto dims = log_K.dimensions();
  if (dims.size() < 2) return ffi::Error::InvalidArgument("log_K must have shape (..., n, m)");
  const int n = static_cast<int>(dims[dims.size() - 2]);
  const int m = static_cast<int>(dims[dims.size() - 1]);
  if (k < 1 || r < 1 || r > 12 || def < 0 || def >= k)
    return ffi::Error::InvalidArgument("bad records layout");
  const Layout layout(k, r, def);
  if (n != layout.n || m < 1) return ffi::Error::InvalidArgument("log_K needs k^r rows");
  const int64_t count = static_cast<int64_t>(log_K.element_count()) / (n * m);
  if (static_cast<int64_t>(log_prior.element_count()) != count * n ||
      static_cast<int64_t>(dp->element_count()) != count)
    return ffi::Error::InvalidArgument("log_prior and the levels must match log_K");
  DatabaseScratch scratch(n, m);
  float* const out[6] = {dp->typed_data(), bdp->typed_data(), sp->typed_data(),
                         bsp->typed_data(), mp->typed_data(), games->typed_data()};
  for (int64_t first = 0; first < count; first += kLanes)
    database_block(log_K.typed_data(), log_prior.typed_data(), first, count, m, want, layout,
                   scratch, out);
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxprivDatabaseLevels, DatabaseLevels,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Attr<int32_t>("k")
                                  .Attr<int32_t>("r")
                                  .Attr<int32_t>("default")
                                  .Attr<int32_t>("want"));

// ---------------------------------------------------------------------------------------------
// The sweep's mechanism sampler (jaxpriv.kernels.samplers.sample_log_K), written for the CPU.
//
// Same draws as the JAX sampler: every random word is the counter hash of its index keyed by
// two seed words that JAX derives from the block's key (jaxpriv.kernels.samplers.random_bits; a row's
// entries one round over the row's word, jaxpriv.kernels.samplers.entry_bits), so the
// integer words, the uniform variates built from them, every mixture choice and every sparsity
// mask are bit for bit the JAX sampler's; only exp, log and sqrt are this file's own
// polynomials, so log K agrees with the JAX sampler's to float32 rounding (a few ulps), not bit
// for bit. One lane per mechanism, as above, lanes grouped by mixture branch (sample_tile), so
// each mechanism costs only its own branch (1.4× faster than computing all three and selecting:
// 6.6e6 vs 4.6e6 mechanisms/s at n = m = 8, 2-core Xeon AVX-512); each mechanism's values are
// written out row by row. Values depend only on the mechanism's index, never on its neighbours
// in a vector, so results do not depend on the block size or the device count.
// ---------------------------------------------------------------------------------------------

namespace {

typedef uint32_t vu __attribute__((vector_size(kLanes * sizeof(uint32_t))));

// Wellons' lowbias32, the mixer of jaxpriv.kernels.samplers._mix32 (on a vector or one word).
template <class Word>
inline Word mix32(Word x) {
  x ^= x >> 16;
  x *= 0x7FEB352Du;
  x ^= x >> 15;
  x *= 0x846CA68Bu;
  x ^= x >> 16;
  return x;
}

// The word of flat index `index` (jaxpriv.kernels.samplers.random_bits): two rounds of the mixer over
// the index, keyed by the draw's two seed words.
inline vu word_of(vu index, const uint32_t* seed) { return mix32(mix32(index + seed[0]) ^ seed[1]); }

// Entry w's constant of jaxpriv.kernels.samplers.entry_bits: mix32(w·φ + 0x632BE5AB), φ = 0x9E3779B9.
inline uint32_t entry_constant(int w) {
  return mix32(static_cast<uint32_t>(w) * 0x9E3779B9u + 0x632BE5ABu);
}

// Entry w of a row from the row's key, the word of its row index (jaxpriv.kernels.samplers.entry_bits):
// one round of the mixer over key ⊕ constant(w), a round per entry instead of two.
inline vu entry_word(vu key, int w) { return mix32(key ^ entry_constant(w)); }

// A word to a uniform variate in (0, 1) (jaxpriv.kernels.samplers.unit_interval): its top 23 bits as
// the mantissa of a float in [1, 2), minus 1 − 2⁻²⁴.
inline vf unit_of(vu word) {
  return (vf)((word >> 9) | 0x3F800000u) - 0.999999940395355224609375f;
}

// A uniform variate in (0, 1) from the word of flat index `index`.
inline vf unit(vu index, const uint32_t* seed) { return unit_of(word_of(index, seed)); }

// uniform of a word: low + (high − low)·unit, as below.
inline vf uniform_of(vu word, double low, double high) {
  return static_cast<float>(low) + static_cast<float>(high - low) * unit_of(word);
}

// uniform(key, shape, low, high) = low + (high − low)·unit, with high − low rounded once to
// float32 from double, as JAX's weakly typed Python scalars are.
inline vf uniform(vu index, const uint32_t* seed, double low, double high) {
  return uniform_of(word_of(index, seed), low, high);
}

inline vf square_root(vf x) {
#if defined(__AVX512F__)
  return (vf)_mm512_sqrt_ps((__m512)x);
#elif defined(__AVX2__)
  return (vf)_mm256_sqrt_ps((__m256)x);
#else
  vf root;
  for (int j = 0; j < kLanes; ++j) root[j] = std::sqrt(x[j]);
  return root;
#endif
}

// A variate of mean 0 and variance 1 from a word (jaxpriv.kernels.samplers.triangular): the sum of its
// two 16-bit halves, (hi + lo − 65535)·√6/2¹⁶, triangular on (−√6, √6). Exact integer
// arithmetic and one rounded product, so it is the JAX sampler's bit for bit.
inline vf triangular_of(vu word) {
  const vf hi = __builtin_convertvector((vi)(word >> 16), vf);
  const vf lo = __builtin_convertvector((vi)(word & 0xFFFFu), vf);
  return ((hi + lo) - 65535.0f) * kTriangularScale;
}

// log G, G ≈ Gamma(α), from a unit variate z and a uniform u (jaxpriv.kernels.samplers._log_gamma_from):
// log G(α+1) as a normal law's, mean ψ(α+1) and variance ψ′(α+1) by their asymptotic series
// (a = α+1 >= 1), then G(α) = G(α+1)·U^{1/α}. The per-mechanism constants are set once.
struct LogGamma {
  vf mean{}, spread{}, inverse_concentration{};
  LogGamma() = default;
  explicit LogGamma(vf concentration) {
    const vf a = 1.0f + concentration, inverse = 1.0f / a;
    mean = log_positive<true>(a) - inverse * (0.5f + inverse * (1.0f / 12.0f));
    spread = square_root(inverse * (1.0f + inverse * (0.5f + inverse * (1.0f / 6.0f))));
    inverse_concentration = 1.0f / concentration;
  }
  vf operator()(vf z, vf u) const {
    return (mean + spread * z) + log_positive<true>(u) * inverse_concentration;  // u >= 2^-24
  }
};

// log w − logsumexp(log w) over n entries (max-shifted, as jax.scipy.special.logsumexp).
inline void normalize(vf* row, int n) {
  vf top = row[0];
  for (int d = 1; d < n; ++d) top = larger(top, row[d]);
  vf total = splat(0.0f);
  for (int d = 0; d < n; ++d) total += exp_bounded(row[d] - top);
  const vf lse = top + log_positive<true>(total);  // total >= 1: the top entry's e^0
  for (int d = 0; d < n; ++d) row[d] = row[d] - lse;
}

// normalize() of a randomized-response row (rr at w = d, 0 or −∞ elsewhere; rr > 0, so it is
// the row's largest entry): the same sum in the same order, bit for bit, with one exp for the
// whole row instead of one per entry (e^0 is exactly 1 and e^{−∞} exactly 0 in exp_bounded).
inline void normalize_response(vf* row, int m, int d, vf rr) {
  const vf off = exp_bounded(-rr), zero = splat(0.0f);
  vf total = zero;
  for (int w = 0; w < m; ++w) total += w == d ? splat(1.0f) : (row[w] == -kInf ? zero : off);
  const vf lse = rr + log_positive<true>(total);  // total >= 1
  for (int w = 0; w < m; ++w) row[w] = row[w] - lse;
}

constexpr int kDirichlet = 0, kGaussian = 1, kResponse = 2;

// Lane-major values (lanes[k]: entry k of the mechanisms b[0..kLanes)) to their rows of `out`
// (out[b[j]·nm + k]), by the loader's transposes (a square transpose is its own inverse) and
// whole-vector stores; the entries past the last multiple of the vector width one by one.
inline void store_lanes(const vf* lanes, int nm, vu b, float* out) {
  int k = 0;
#if defined(__AVX512F__)
  for (; k + kLanes <= nm; k += kLanes) {
    __m512 rows[kLanes];
    for (int q = 0; q < kLanes; ++q) rows[q] = (__m512)lanes[k + q];
    transpose16(rows);
    for (int j = 0; j < kLanes; ++j)
      _mm512_storeu_ps(out + static_cast<int64_t>(b[j]) * nm + k, rows[j]);
  }
#elif defined(__AVX2__)
  for (; k + kLanes <= nm; k += kLanes) {
    __m256 rows[kLanes];
    for (int q = 0; q < kLanes; ++q) rows[q] = (__m256)lanes[k + q];
    transpose8(rows);
    for (int j = 0; j < kLanes; ++j)
      _mm256_storeu_ps(out + static_cast<int64_t>(b[j]) * nm + k, rows[j]);
  }
#endif
  for (; k < nm; ++k)
    for (int j = 0; j < kLanes; ++j) out[static_cast<int64_t>(b[j]) * nm + k] = lanes[k][j];
}

// Seeds: 8 pairs of words, one per draw of sample_log_K in its order — kind, z, u,
// concentration, scale, RR's ε, sparse, drop rate.
//
// Each mechanism's own mixture branch only. The JAX sampler computes every branch for every
// mechanism and selects; here mechanisms are first sorted by branch (and by whether they are
// sparse), so a vector of kLanes mechanisms of one branch computes only what that branch
// needs: Dirichlet-like rows two words and a log per entry; random logits one word; randomized
// response no word at all; the drop mask's word only for sparse ones.
// The words, choices and masks are those the JAX sampler draws for the same indices.
template <int kN, int kM, int kKind, bool kSparse>
void sample_lanes(const uint32_t* seeds, vu b, int n_, int m_, float* out, std::vector<vf>& row,
                  vf* lanes) {
  const int n = kN ? kN : n_, m = kM ? kM : m_;
  const vf minus_inf = splat(-kInf), zero = splat(0.0f);
  vf scale{}, rr{}, rate{};
  LogGamma log_gamma;
  if (kKind == kDirichlet) {
    log_gamma = LogGamma(exp_bounded(uniform(b, seeds + 6, std::log(1e-2), std::log(1e2))));
  } else if (kKind == kGaussian) {
    scale = exp_bounded(uniform(b, seeds + 8, std::log(1e-2), std::log(1e1)));
  } else {
    rr = uniform(b, seeds + 10, 0.0, 8.0);
  }
  if (kSparse) rate = uniform(b, seeds + 14, 0.0, 0.5);
  const vu rows = b * static_cast<uint32_t>(n);
  for (int d = 0; d < n; ++d) {
    vf top = minus_inf;
    // the row's keys for its entries' z and u words (entry_bits)
    const vu row_index = rows + static_cast<uint32_t>(d);
    vu key_z{}, key_u{};
    if (kKind != kResponse) key_z = word_of(row_index, seeds + 2);
    if (kKind == kDirichlet || kSparse) key_u = word_of(row_index, seeds + 4);
    for (int w = 0; w < m; ++w) {
      vf value, u{};
      if (kKind == kDirichlet || kSparse) u = unit_of(entry_word(key_u, w));
      if (kKind == kResponse) {
        value = d == w ? rr : zero;
      } else {
        const vf z = triangular_of(entry_word(key_z, w));
        value = kKind == kDirichlet ? log_gamma(z, u) : scale * z;
      }
      row[w] = value;
      if (kSparse) row[m + w] = (vf)(u < rate);  // the drop mask, as bits
      top = larger(top, value);
    }
    if (kSparse)
      for (int w = 0; w < m; ++w) {
        const vi dropped = (vi)row[m + w] & (row[w] < top);  // never a row's largest entry
        row[w] = dropped ? minus_inf : row[w];
      }
    if (kKind == kResponse) {
      normalize_response(row.data(), m, d, rr);
    } else {
      normalize(row.data(), m);
    }
    for (int w = 0; w < m; ++w) lanes[d * m + w] = row[w];
  }
  store_lanes(lanes, n * m, b, out);
}

// A vector of mechanisms from list[i..]; past the list's end, lanes repeat its first one (the
// same values, written twice).
inline vu list_lanes(const uint32_t* list, int64_t i, int64_t length) {
  vu b;
  for (int j = 0; j < kLanes; ++j) b[j] = i + j < length ? list[i + j] : list[0];
  return b;
}

// Mechanisms [first, first + size): sorted into lists by branch and sparsity, each list drawn
// kLanes at a time (a short list's last vector repeats its first index: the same values,
// written twice).
template <int kN, int kM>
void sample_tile(const uint32_t* seeds, float sparse_fraction, int64_t first, int64_t size,
                 int n, int m, float* out, std::vector<vf>& row, std::vector<uint32_t>& lists,
                 vf* lanes) {
  // lists: 6 × size, list l = 2·branch + sparse; with n ≠ m randomized response is a Gaussian
  // logit row (the JAX sampler's `rr = gaussian`)
  int64_t length[6] = {0, 0, 0, 0, 0, 0};
  for (int64_t i = 0; i < size; i += kLanes) {
    vu b;
    for (int j = 0; j < kLanes; ++j) b[j] = static_cast<uint32_t>(first + i + j);
    const vf kind = uniform(b, seeds + 0, 0.0, 3.0);  // floor(kind): 0, 1 or 2
    const vi sparse = unit(b, seeds + 12) < sparse_fraction;
    for (int j = 0; j < kLanes && i + j < size; ++j) {
      int branch = kind[j] < 1.0f ? kDirichlet : kind[j] < 2.0f ? kGaussian : kResponse;
      if (branch == kResponse && n != m) branch = kGaussian;
      const int l = 2 * branch + (sparse[j] ? 1 : 0);
      lists[l * size + length[l]++] = b[j];
    }
  }
  for (int l = 0; l < 6; ++l) {
    const uint32_t* list = lists.data() + l * size;
    for (int64_t i = 0; i < length[l]; i += kLanes) {
      const vu b = list_lanes(list, i, length[l]);
      switch (l) {
        case 0: sample_lanes<kN, kM, kDirichlet, false>(seeds, b, n, m, out, row, lanes); break;
        case 1: sample_lanes<kN, kM, kDirichlet, true>(seeds, b, n, m, out, row, lanes); break;
        case 2: sample_lanes<kN, kM, kGaussian, false>(seeds, b, n, m, out, row, lanes); break;
        case 3: sample_lanes<kN, kM, kGaussian, true>(seeds, b, n, m, out, row, lanes); break;
        case 4: sample_lanes<kN, kM, kResponse, false>(seeds, b, n, m, out, row, lanes); break;
        default: sample_lanes<kN, kM, kResponse, true>(seeds, b, n, m, out, row, lanes);
      }
    }
  }
}

constexpr int64_t kTile = 1024;  // mechanisms sorted together (their lists stay in cache)

// Draws in a sampler's output of `trailing` axes (count and a row's axes) with `words` seed words
// each: the product of the leading axes (vmap's batch), or −1 if the seeds do not match it.
inline int64_t leading_draws(const ffi::Span<const int64_t>& dims, size_t trailing,
                             size_t seed_words, size_t words) {
  int64_t draws = 1;
  for (size_t i = 0; i + trailing < dims.size(); ++i) draws *= dims[i];
  return static_cast<int64_t>(seed_words) == static_cast<int64_t>(words) * draws ? draws : -1;
}

// log_K (..., count, n, m) with seeds (..., 8, 2): each leading index an independent draw of
// `count` mechanisms with its own seeds (vmap's batch, e.g. the sweep's blocks drawn together).
ffi::Error SampleLogK(ffi::Buffer<ffi::U32> seeds, ffi::ResultBuffer<ffi::F32> log_K,
                      float sparse_fraction) {
  const auto dims = log_K->dimensions();
  const size_t rank = dims.size();
  if (rank < 3) return ffi::Error::InvalidArgument("log_K must have shape (..., count, n, m)");
  const int64_t draws = leading_draws(dims, 3, seeds.element_count(), 16);
  if (draws < 0) return ffi::Error::InvalidArgument("seeds must be 8 pairs per draw");
  const int64_t count = dims[rank - 3];
  const int n = static_cast<int>(dims[rank - 2]), m = static_cast<int>(dims[rank - 1]);
  if (count * n * m >= (int64_t{1} << 32))
    return ffi::Error::InvalidArgument("at most 2^32 - 1 entries per draw");
  std::vector<vf> row(2 * m);
  std::vector<uint32_t> lists(6 * kTile);
  std::vector<vf> lanes(n * m);
  for (int64_t g = 0; g < draws; ++g) {
    float* out = log_K->typed_data() + g * count * n * m;
    const uint32_t* s = seeds.typed_data() + 16 * g;
    auto run = [&](auto kernel) {
      for (int64_t first = 0; first < count; first += kTile)
        kernel(s, sparse_fraction, first, count - first < kTile ? count - first : kTile, n, m,
               out, row, lists, lanes.data());
    };
    if (n == 8 && m == 8) {
      run(sample_tile<8, 8>);
    } else if (n == 4 && m == 4) {
      run(sample_tile<4, 4>);
    } else {
      run(sample_tile<0, 0>);
    }
  }
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxprivSampleLogK, SampleLogK,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Attr<float>("sparse_fraction"));

// ---------------------------------------------------------------------------------------------
// Priors and beliefs (jaxpriv.kernels.samplers.sample_log_prior, _with_zeros and the belief tilt of
// jaxpriv.kernels.samplers.sample): the same random words for the same indices, one lane per mechanism.
// Seeds: 10 pairs — the prior's k1, k2, the Dirichlet's unit variate and uniform, k3 (flat or not),
// the zeros' rows, rate and drop, the belief's tilt and size.
// ---------------------------------------------------------------------------------------------

namespace {

constexpr int kPriorUniform = 0, kPriorClose = 1, kPriorDirichlet = 2;

// Each lane's row (row[d][j]: entry d of mechanism b[j]) to out[b[j]·n + d], by the loader's
// transpose and one masked store per mechanism where a vector holds a row (n <= kLanes), else
// entry by entry. Lanes may repeat an index (the same values, written twice).
inline void store_rows(const vf* row, int n, vu b, float* out) {
#if defined(__AVX512F__)
  if (n <= kLanes) {
    __m512 rows[kLanes];
    for (int q = 0; q < kLanes; ++q) rows[q] = q < n ? (__m512)row[q] : _mm512_setzero_ps();
    transpose16(rows);
    const __mmask16 mask = static_cast<__mmask16>((1u << n) - 1u);
    for (int j = 0; j < kLanes; ++j)
      _mm512_mask_storeu_ps(out + static_cast<int64_t>(b[j]) * n, mask, rows[j]);
    return;
  }
#elif defined(__AVX2__)
  if (n <= kLanes) {
    __m256 rows[kLanes];
    for (int q = 0; q < kLanes; ++q) rows[q] = q < n ? (__m256)row[q] : _mm256_setzero_ps();
    transpose8(rows);
    vi mask;
    for (int q = 0; q < kLanes; ++q) mask[q] = q < n ? -1 : 0;
    for (int j = 0; j < kLanes; ++j)
      _mm256_maskstore_ps(out + static_cast<int64_t>(b[j]) * n, (__m256i)mask, rows[j]);
    return;
  }
#endif
  for (int d = 0; d < n; ++d)
    for (int j = 0; j < kLanes; ++j) out[static_cast<int64_t>(b[j]) * n + d] = row[d][j];
}

// Which lanes of a Dirichlet-kind vector hold the flat prior: every lane, none, or some.
constexpr int kFlatSome = 0, kFlatAll = 1, kFlatNone = 2;

// The prior and belief of the mechanisms b (one lane each; kFlat: for the Dirichlet kind, which
// lanes hold the flat prior, so a vector of flat ones skips the Dirichlet draw and a vector of
// none the selection — the same bits either way, as every lane depends on its own index only).
template <int kFlat>
void prior_lanes(const uint32_t* seeds, int kind, float eps_max, float zero_fraction,
                 float belief_eps_max, vu b, int n, vf* row, float* log_prior,
                 float* log_belief) {
  const float flat_level = static_cast<float>(-std::log(static_cast<double>(n)));
  if (kind == kPriorUniform || (kind == kPriorDirichlet && kFlat == kFlatAll)) {
    for (int d = 0; d < n; ++d) row[d] = splat(flat_level);
  } else if (kind == kPriorClose) {
    vf low = splat(kInf), high = splat(-kInf);
    const vu key = word_of(b, seeds + 0);
    for (int d = 0; d < n; ++d) {
      row[d] = unit_of(entry_word(key, d));
      low = smaller(low, row[d]);
      high = larger(high, row[d]);
    }
    const vf spread = high - low;
    const vf divisor = spread > 0.0f ? spread : splat(1.0f);
    const vf eps = uniform(b, seeds + 2, 0.0, eps_max);
    for (int d = 0; d < n; ++d) row[d] = eps * ((row[d] - low) / divisor);
    normalize(row, n);
  } else {
    const LogGamma log_gamma(exp_bounded(uniform(b, seeds + 0, std::log(1e-1), std::log(1e2))));
    const vu key_z = word_of(b, seeds + 4), key_u = word_of(b, seeds + 6);
    for (int d = 0; d < n; ++d) {
      row[d] = log_gamma(triangular_of(entry_word(key_z, d)), unit_of(entry_word(key_u, d)));
    }
    normalize(row, n);
    if (kFlat == kFlatSome) {
      const vi flat = unit(b, seeds + 8) < 0.5f;
      for (int d = 0; d < n; ++d) row[d] = flat ? splat(flat_level) : row[d];
    }
  }
  if (zero_fraction > 0.0f) {
    const vi chosen = unit(b, seeds + 10) < zero_fraction;
    const vf rate = uniform(b, seeds + 12, 0.0, 0.5);
    vf top = row[0];
    for (int d = 1; d < n; ++d) top = larger(top, row[d]);
    const vu key = word_of(b, seeds + 14);
    for (int d = 0; d < n; ++d) {
      const vi drop = unit_of(entry_word(key, d)) < rate;
      row[d] = (chosen & drop & (row[d] < top)) ? splat(-kInf) : row[d];
    }
    normalize(row, n);
  }
  store_rows(row, n, b, log_prior);
  if (belief_eps_max > 0.0f) {
    const vf size = uniform(b, seeds + 18, 0.0, belief_eps_max);
    const vu key = word_of(b, seeds + 16);
    for (int d = 0; d < n; ++d) row[d] = row[d] + size * uniform_of(entry_word(key, d), -1.0, 1.0);
    normalize(row, n);
  }
  store_rows(row, n, b, log_belief);
}

// The whole draw: count priors and beliefs of n secrets each, rows of log_prior and log_belief.
void sample_prior(const uint32_t* s, int kind, float eps_max, float zero_fraction,
                  float belief_eps_max, int64_t count, int n, float* prior, float* belief) {
  if (count == 0) return;
  std::vector<vf> row(n);
  if (kind != kPriorDirichlet) {
    for (int64_t first = 0; first < count; first += kLanes) {
      vu b;
      for (int j = 0; j < kLanes; ++j)
        b[j] = static_cast<uint32_t>(first + j < count ? first + j : first);
      prior_lanes<kFlatSome>(s, kind, eps_max, zero_fraction, belief_eps_max, b, n, row.data(),
                             prior, belief);
    }
    return;
  }
  // Dirichlet: half the priors are flat; sorted into flat and drawn lists, tile by tile
  std::vector<uint32_t> lists(2 * kTile);
  for (int64_t first = 0; first < count; first += kTile) {
    const int64_t size = count - first < kTile ? count - first : kTile;
    int64_t length[2] = {0, 0};
    for (int64_t i = 0; i < size; i += kLanes) {
      vu b;
      for (int j = 0; j < kLanes; ++j) b[j] = static_cast<uint32_t>(first + i + j);
      const vi flat = unit(b, s + 8) < 0.5f;
      for (int j = 0; j < kLanes && i + j < size; ++j) {
        const int l = flat[j] ? 0 : 1;
        lists[l * kTile + length[l]++] = b[j];
      }
    }
    for (int64_t i = 0; i < length[0]; i += kLanes)
      prior_lanes<kFlatAll>(s, kind, eps_max, zero_fraction, belief_eps_max,
                            list_lanes(lists.data(), i, length[0]), n, row.data(), prior,
                            belief);
    for (int64_t i = 0; i < length[1]; i += kLanes)
      prior_lanes<kFlatNone>(s, kind, eps_max, zero_fraction, belief_eps_max,
                             list_lanes(lists.data() + kTile, i, length[1]), n, row.data(), prior,
                             belief);
  }
}

// log_prior, log_belief (..., count, n) with seeds (..., 10, 2): one draw per leading index.
ffi::Error SamplePrior(ffi::Buffer<ffi::U32> seeds, ffi::ResultBuffer<ffi::F32> log_prior,
                       ffi::ResultBuffer<ffi::F32> log_belief, int32_t kind, float eps_max,
                       float zero_fraction, float belief_eps_max) {
  const auto dims = log_prior->dimensions();
  const size_t rank = dims.size();
  if (rank < 2) return ffi::Error::InvalidArgument("log_prior must have shape (..., count, n)");
  const int64_t draws = leading_draws(dims, 2, seeds.element_count(), 20);
  if (draws < 0) return ffi::Error::InvalidArgument("seeds must be 10 pairs per draw");
  if (kind < kPriorUniform || kind > kPriorDirichlet)
    return ffi::Error::InvalidArgument("unknown prior kind");
  const int64_t count = dims[rank - 2];
  const int n = static_cast<int>(dims[rank - 1]);
  if (count * n >= (int64_t{1} << 32))
    return ffi::Error::InvalidArgument("at most 2^32 - 1 entries per draw");
  for (int64_t g = 0; g < draws; ++g)
    sample_prior(seeds.typed_data() + 20 * g, kind, eps_max, zero_fraction, belief_eps_max, count,
                 n, log_prior->typed_data() + g * count * n,
                 log_belief->typed_data() + g * count * n);
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxprivSamplePrior, SamplePrior,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::U32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Attr<int32_t>("kind")
                                  .Attr<float>("eps_max")
                                  .Attr<float>("zero_fraction")
                                  .Attr<float>("belief_eps_max"));

// ---------------------------------------------------------------------------------------------
// The sweep's reduction of a group of blocks (jaxpriv.kernels.native.group_winners, for
// jaxpriv.engines.sweep's evaluate_block): what XLA computes with scatters, gathers and top_k — about a
// hundred small operations of fixed cost each — in one pass.
//
// Positions are the mechanisms' places in the group, in the order of their global indices, so
// "ties to the smallest index" is "ties to the smallest position". Per cell (cell < 0: not in
// range) the count, and the position of the highest score above −∞ (−1: none; a NaN score in
// a cell leaves it none, as XLA's NaN-propagating max does); the same over every mechanism for
// `worst`; per block of `block` positions the `k` lowest `order` values (NaN never given: the
// caller maps it), ties to the smaller position, lowest first (jax.lax.top_k of −order).
// ---------------------------------------------------------------------------------------------

namespace {

ffi::Error GroupWinners(ffi::Buffer<ffi::S32> cell, ffi::Buffer<ffi::F32> score,
                        ffi::Buffer<ffi::F32> worst, ffi::Buffer<ffi::F32> order,
                        ffi::ResultBuffer<ffi::S32> winner, ffi::ResultBuffer<ffi::S32> count,
                        ffi::ResultBuffer<ffi::S32> worst_winner,
                        ffi::ResultBuffer<ffi::S32> lowest, int32_t block) {
  const int64_t size = cell.element_count(), cells = winner->element_count();
  const int64_t k = lowest->dimensions().back();
  if (score.element_count() != size || worst.element_count() != size ||
      order.element_count() != size || count->element_count() != cells || block <= 0 ||
      size % block != 0 || k < 1 || k > block || lowest->element_count() != size / block * k ||
      worst_winner->element_count() != 1)
    return ffi::Error::InvalidArgument("group_winners: inconsistent shapes");
  const int32_t* c = cell.typed_data();
  const float* s = score.typed_data();
  const float* v = worst.typed_data();
  const float* o = order.typed_data();
  int32_t* win = winner->typed_data();
  int32_t* n = count->typed_data();
  std::vector<float> best(cells, -kInf);
  std::vector<char> poisoned(cells, 0);
  for (int64_t j = 0; j < cells; ++j) win[j] = -1, n[j] = 0;
  float worst_best = -kInf;
  bool worst_poisoned = false;
  int32_t worst_at = -1;
  for (int64_t i = 0; i < size; ++i) {
    const float w = v[i];
    if (w != w) worst_poisoned = true;
    else if (w > worst_best) worst_best = w, worst_at = static_cast<int32_t>(i);
    const int32_t j = c[i];
    if (j < 0 || j >= cells) continue;
    ++n[j];
    const float x = s[i];
    if (x != x) poisoned[j] = 1;
    else if (x > best[j]) best[j] = x, win[j] = static_cast<int32_t>(i);
  }
  for (int64_t j = 0; j < cells; ++j)
    if (poisoned[j]) win[j] = -1;
  worst_winner->typed_data()[0] = worst_poisoned ? -1 : worst_at;
  // the k lowest of each block: an insertion list, entered only below its largest
  std::vector<float> value(k);
  int32_t* low = lowest->typed_data();
  for (int64_t first = 0; first < size; first += block) {
    int32_t* at = low + first / block * k;
    int64_t filled = 0;
    for (int64_t i = first; i < first + block; ++i) {
      const float x = o[i];
      if (filled == k && !(x < value[k - 1])) continue;
      int64_t q = filled < k ? filled++ : k - 1;
      while (q > 0 && x < value[q - 1]) {  // equal values keep the earlier position first
        value[q] = value[q - 1];
        at[q] = at[q - 1];
        --q;
      }
      value[q] = x;
      at[q] = static_cast<int32_t>(i);
    }
  }
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxprivGroupWinners, GroupWinners,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::S32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::S32>>()
                                  .Ret<ffi::Buffer<ffi::S32>>()
                                  .Ret<ffi::Buffer<ffi::S32>>()
                                  .Ret<ffi::Buffer<ffi::S32>>()
                                  .Attr<int32_t>("block"));

// Mechanisms per vector in this build: 16 with AVX-512, 8 with AVX2, 4 otherwise. With 4 (SSE,
// or another architecture's 128-bit vectors) the kernel is correct but no faster than XLA's
// (measured with -march=x86-64: 3.5e6 vs 4.1e6/s at n = m = 8), so jaxpriv.kernels.native does not use
// it by default there.
extern "C" int JaxprivNativeLanes() { return kLanes; }
