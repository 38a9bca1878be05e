// The zCDP level of float32 pairs, rho = sup_{alpha>1} D_alpha(P||Q)/alpha (Bun, Steinke 2016,
// Def. 1.1), and the order that attains it: jaxpriv.kernels.pair_levels' float32 path on the CPU.
//
// Why by hand: XLA:CPU evaluates the float32 level as a 12-point grid and 16 golden-section steps
// over the order, each a vector operation over a short trailing axis of outputs; the search's
// premise retraction evaluates ~15 such levels per step, and that was most of a zCDP-premise
// search. Here each pair is one loop in double precision (the orders of its first grid and of
// each branch-and-bound split evaluated together, a loop that vectorizes), and the search over
// u = log(alpha - 1) is the float64 reference's (jaxpriv.core.zcdp): a branch and bound whose
// intervals are bounded by the chord of the convex K(t) = (alpha - 1) D_alpha, t = alpha - 1, but
// at most kRounds rounds (fewer where no interval's bound exceeds the best value by kTolerance),
// then Newton's method on g's stationarity condition between the best point's neighbours. So it finds the higher of two
// local maxima, which the float32 XLA search can miss.
//
// Evaluation without cancellation: with L = log(P/Q) and phi(x) = e^x - 1 - x >= 0,
//   alpha(alpha - 1) H_alpha = sum_{P>0} P phi(t L) + t KL,   KL = sum_{P>0} P phi(-L) + sum_{P=0} Q
// (the f-divergence form of sum P^alpha Q^(1-alpha) - 1, every term >= 0), and
// D_alpha / alpha = log1p(that) / (t (t + 1)); where t max L > 600 the log-sum-exp of
// log P + t L instead (no overflow, no underflow of an output whose P is below double's range;
// the normalization's float32 rounding is then negligible).
//
// Contract (tests/test_native_pair_levels.py holds it against the float64 reference): for each
// pair, value = rho rounded to float32 and order = the maximizing u, -inf where the alpha -> 1
// limit (KL) is the max; +inf value where Q = 0 < P somewhere (every D_alpha is), 0 where P = Q
// (D_inf = 0); NaN in, NaN out. With the attribute group > 1, only each group's max (and the
// pairs attaining it) is so; a pair that cannot attain it reads a lower bound (group_of_pairs).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "fast_math.h"
#include "pair_twins.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;
using jaxpriv_fast::fast_exp;
using jaxpriv_fast::fast_expm1;
using jaxpriv_fast::fast_log1p;

namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();
constexpr int kGrid = 12;            // points of the first grid in u
constexpr int kSplit = 3;            // points each round adds inside the interval it splits
constexpr int kRounds = 4;           // branch-and-bound rounds at most
constexpr int kMaxPoints = kGrid + kSplit * kRounds;
constexpr double kTolerance = 1e-7;  // relative gap below which no interval is split
constexpr int kNewtonSteps = 12;     // safeguarded Newton steps between the best point's neighbours
constexpr double kLow = -13.815510557964274;   // log(1e-6): alpha - 1 from 1e-6
constexpr double kChordTop = 1e150;  // alpha - 1 at most this; beyond, t (t + 1) would overflow:
                                     // the bound D_inf/(t + 1)
constexpr double kLargeExponent = 600.0;  // beyond, e^{t L} would near overflow

// phi(x) = e^x - 1 - x without cancellation near 0: its series x^2/2! + ... + x^6/6! for
// |x| < 1/100 (the remainder is below 3e-14 of the sum there), else expm1(x) - x (relative error
// below 5e-14 for |x| >= 1/100).
inline double phi_series(double x) {
  return x * x * (0.5 + x * (1.0 / 6.0 + x * (1.0 / 24.0 + x * (1.0 / 120.0 + x / 720.0))));
}

// phi(x) from expm1(x): phi_series near 0, else expm1(x) - x (both, then a select: a loop of it
// vectorizes).
inline double phi_from(double x, double expm1_x) {
  return std::fabs(x) < 0.01 ? phi_series(x) : expm1_x - x;
}

// expm1(x) and phi(x) by fast_expm1, branch-free (expm1 from phi near 0, for their agreement),
// and phi alone.
inline void fast_expm1_phi(double x, double* em1, double* f) {
  const double direct = fast_expm1(x);
  *f = phi_from(x, direct);
  *em1 = std::fabs(x) < 0.01 ? *f + x : direct;
}

inline double fast_phi(double x) {
  double em1, f;
  fast_expm1_phi(x, &em1, &f);
  return f;
}

struct Pair {
  int size = 0;            // outputs with P > 0
  double L[64];            // their log(P/Q) (the first 64; more go to the heap)
  double P[64];            // their P
  double LP[64];           // their log P (P may be 0 in double precision where log P < -745)
  const double* l = L;
  const double* p = P;
  const double* lp = LP;
  double kl = 0.0;
  double d_inf = 0.0;
};

// g = D_alpha/alpha = K(t)/(t(t + 1)) at t = alpha - 1 > 0 and, if `slopes`, the numerator of
// its derivative N = K' w - K w' (w = t(t + 1)) and N' = K'' w - 2K: g is stationary where N = 0.
// K = log(1 + S), S = sum P phi(tL) + t KL, S' = sum P L expm1(tL) + KL, S'' = sum P L^2 e^{tL};
// where t max L > kLargeExponent, K = log sum e^{log P + tL} (shifted by its largest term) and
// its derivatives are the mean and variance of L under the weights P e^{tL}.
inline void with_slope(const Pair& pair, double t, bool slopes, double* g, double* n,
                       double* dn) {
  const double top = t * pair.d_inf;
  const double w = t * (t + 1.0);
  double K, dK = 0.0, ddK = 0.0;
  if (top > kLargeExponent) {
    // log sum exp(log P + tL), shifted by its largest term: an output whose P is 0 in double
    // precision (log P < -745) can still carry D_inf, and with it every D_alpha of large alpha
    double shift = -kInfinity;
    for (int i = 0; i < pair.size; ++i) shift = std::max(shift, pair.lp[i] + t * pair.l[i]);
    double sum = 0.0, first = 0.0, second = 0.0;
    for (int i = 0; i < pair.size; ++i) {
      const double l = pair.l[i];
      const double e = std::exp(pair.lp[i] + t * l - shift);
      sum += e;
      first += e * l;
      second += e * l * l;
    }
    K = shift + std::log(sum);
    if (slopes) {
      dK = first / sum;
      ddK = std::max(second / sum - dK * dK, 0.0);
    }
  } else {
    double S = t * pair.kl, dS = pair.kl, ddS = 0.0;
    for (int i = 0; i < pair.size; ++i) {
      double em1, f;
      fast_expm1_phi(t * pair.l[i], &em1, &f);
      const double p = pair.p[i], l = pair.l[i];
      S += p * f;
      if (slopes) {
        dS += p * l * em1;
        ddS += p * l * l * (1.0 + em1);
      }
    }
    K = fast_log1p(S);
    if (slopes) {
      dK = dS / (1.0 + S);
      ddK = std::max(ddS / (1.0 + S) - dK * dK, 0.0);
    }
  }
  *g = K / w;
  if (slopes) {
    *n = dK * w - K * (2.0 * t + 1.0);
    *dn = ddK * w - 2.0 * K;
  }
}

// D_alpha / alpha at t = alpha - 1 > 0.
inline double over_order(const Pair& pair, double t) {
  double g, n, dn;
  return with_slope(pair, t, false, &g, &n, &dn), g;
}

constexpr int kBatch = 16;  // orders evaluated together at most (the grid: kGrid)

// D_alpha / alpha at count <= kBatch orders t[j] > 0 together, the loop over orders innermost
// (it vectorizes); an order where t max L > kLargeExponent is evaluated again by over_order's
// log-sum-exp form. Sums in the same order as over_order.
inline void over_orders(const Pair& pair, const double* t, int count, double* g) {
  double S[kBatch];
  for (int j = 0; j < count; ++j) S[j] = t[j] * pair.kl;
  for (int i = 0; i < pair.size; ++i) {
    const double l = pair.l[i], p = pair.p[i];
    for (int j = 0; j < count; ++j) S[j] += p * fast_phi(t[j] * l);
  }
  for (int j = 0; j < count; ++j) g[j] = fast_log1p(S[j]) / (t[j] * (t[j] + 1.0));
  for (int j = 0; j < count; ++j)
    if (t[j] * pair.d_inf > kLargeExponent) g[j] = over_order(pair, t[j]);
}

// std::max by value (std::max returns a reference, which kept a loop of chord_sup from
// vectorizing): the same results, NaN included.
inline double max_of(double a, double b) { return a < b ? b : a; }

// sup over [tl, tr] of c(t)/(t(t+1)), c the chord through (tl, Kl), (tr, Kr), K = g t (t + 1)
// (as jaxpriv.core.zcdp.chord_sup), from g at the ends: with c = a + s t, h = c/(t(t + 1)) is
// gl, gr at the ends, and h' has the sign of -(s t^2 + 2a t + a), whose roots are
// t = (-a +- sqrt(a^2 - a s))/s: h's local max is x = (-a + sqrt(a^2 - a s))/s (the larger
// root where s > 0, the smaller where s < 0), its value there s/(2x + 1); the other root is a
// local min, never above both ends. In the chord's rise S = s w and w a (w = tr - tl), one
// division: D = w s x = sqrt(w^2 (a^2 - a s)) - w a, s/(2x + 1) = S^2/(w (2D + S)), and x lies
// inside where (D - tl S) S > 0 and (tr S - D) S > 0. (Before: x and s/(2x + 1) by three
// divisions, each waiting on the last: a tenth of the kernel.) Branch-free (the grid's bounds
// are independent: interval_bounds' loop vectorizes). Where S = 0 or a^2 < a s, h has no
// stationary point inside: the ends' values are the sup. NaN where gl or gr is not finite or
// the arithmetic overflows (from g t^3 ~ 1e154: t beyond 1e51 to 1e77 with g; the old formula
// lost the bound there by cancellation): bound_between takes D_inf/(tl + 1) there.
inline double chord_sup(double tl, double tr, double gl, double gr) {
  const double Kl = gl * tl * (tl + 1.0), Kr = gr * tr * (tr + 1.0);
  const double w = tr - tl;
  const double S = Kr - Kl;
  const double wa = Kl * w - S * tl;
  const double disc = wa * wa - wa * S;
  const double D = std::sqrt(max_of(disc, 0.0)) - wa;
  const double at_x = S * S / (w * (2.0 * D + S));
  const bool inside = (disc >= 0.0) & (w > 0.0) & ((D - tl * S) * S > 0.0) &
                      ((tr * S - D) * S > 0.0);
  const double sup = max_of(max_of(gl, gr), inside ? at_x : -kInfinity);
  return std::fabs(disc) <= std::numeric_limits<double>::max() ? sup
                                                               : std::numeric_limits<double>::quiet_NaN();
}

struct Point {
  double u, t, g;
};

// The bound of D_alpha/alpha between the orders tl < tr where it is gl, gr (branch-free):
// the chord's, or D_inf/(tl + 1) (D_alpha <= D_inf) beyond kChordTop or where the chord's
// arithmetic overflows.
inline double bound_between(double d_inf, double tl, double gl, double tr, double gr) {
  const double chord = chord_sup(tl, tr, gl, gr);
  return tr > kChordTop || chord != chord ? d_inf / (tl + 1.0) : chord;
}

// The bound of D_alpha/alpha over each of the count - 1 intervals between neighbouring points
// (bounds[j]: of [points[j], points[j + 1]]), in a loop that vectorizes (the grid's eleven
// chord bounds one after another, their divisions waiting on each other, were a third of a
// group's first pass).
inline void interval_bounds(const Pair& pair, const Point* points, int count, double* bounds) {
  double t[kMaxPoints], g[kMaxPoints];
  for (int j = 0; j < count; ++j) t[j] = points[j].t, g[j] = points[j].g;
  const double d_inf = pair.d_inf;
  for (int j = 0; j + 1 < count; ++j)
    bounds[j] = bound_between(d_inf, t[j], g[j], t[j + 1], g[j + 1]);
}

// How a pair's level is known before any search: NaN, infinite or 0.
enum class Settled { kNo, kNaN, kInfinite, kZero };

// What a group's first pass keeps of a pair, from its outputs in the order given (not the
// canonical order: these sums only bound the level, they are not its value): KL, D_inf, the
// least L, sum P, sum P L, and a hash of the multiset of its (log P, log Q) bits (twins have the
// same one).
struct Summary {
  double kl = 0.0, d_inf = 0.0, l_min = 0.0, sum_p = 0.0, sum_pl = 0.0;
  uint64_t hash = 0;
};

inline uint64_t mix64(uint64_t x) {  // splitmix64's finalizer
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// An output's term of KL, P phi(-L); Q - P + P L where phi(-L) would overflow (`large`: -L >
// kLargeExponent; `q` = Q is read only then, `phi` = phi(-L) only otherwise).
inline double kl_term(double p, double l, bool large, double q, double phi) {
  return large ? q - p + p * l : p * phi;
}

// Per output of a group's pairs (flat, in the order given): the terms of every sum over a
// pair's outputs (its summary's, and prepare()'s in canonical order), branch-free, so that the
// loop over a whole group's outputs vectorizes (scalar exp and expm1 calls for every pair of a
// group were a third of the kernel's time).
struct Terms {
  std::vector<double> kl, l, p;  // P phi(-L) (Q where P = 0); L (0 where P or Q is 0); P (0 so)
  std::vector<uint64_t> hash;    // a mix of the output's (log P, log Q) bits
  std::vector<int64_t> flags;    // 1: NaN, 2: Q = 0 < P, 4: P, Q > 0
  void resize(size_t n) { kl.resize(n), l.resize(n), p.resize(n), hash.resize(n), flags.resize(n); }
};

void output_terms(const float* log_P, const float* log_Q, int64_t count, Terms& out,
                  bool hashed = true) {
  double* kl_terms = out.kl.data();
  double* l_out = out.l.data();
  double* p_out = out.p.data();
  uint64_t* hash = out.hash.data();
  int64_t* flags = out.flags.data();
  if (hashed) {  // (one pair alone has no twins to find)
    for (int64_t e = 0; e < count; ++e) {
      uint32_t bits_p, bits_q;
      std::memcpy(&bits_p, log_P + e, sizeof bits_p);
      std::memcpy(&bits_q, log_Q + e, sizeof bits_q);
      hash[e] = mix64((static_cast<uint64_t>(bits_p) << 32) | bits_q);
    }
  }
  for (int64_t e = 0; e < count; ++e) {
    const double lp = log_P[e], lq = log_Q[e];
    const bool nan = (lp != lp) | (lq != lq);
    const bool p_zero = lp == -kInfinity, q_zero = lq == -kInfinity;
    const bool valid = !p_zero & !q_zero & !nan;
    // two exponentials, not three: e^{log P} (e^{log Q} where P = 0, the term then), and
    // phi(-L) (e^{log Q} where phi(-L) would overflow), from one reduction each: the values of
    // fast_exp(log P), fast_exp(log Q) and fast_phi(-L), bit for bit
    const double first = fast_exp(p_zero ? lq : lp);  // 0 at -inf
    const double p = p_zero ? 0.0 : first;
    const double l = valid ? lp - lq : 0.0;
    const bool large = -l > kLargeExponent;
    const double y = large ? lq : -l;
    const jaxpriv_fast::ExpExpm1 of_y = jaxpriv_fast::fast_exp_expm1(y);
    const double term = kl_term(p, l, large, of_y.exp, phi_from(y, of_y.expm1));
    kl_terms[e] = valid ? term : (p_zero & !nan ? first : 0.0);
    l_out[e] = l;
    p_out[e] = valid ? p : 0.0;
    flags[e] = (nan ? 1 : 0) | (!p_zero & q_zero & !nan ? 2 : 0) | (valid ? 4 : 0);
  }
}

constexpr double kFastExpLow = -700.0;  // fast_exp reads 0 below

// An output's P and its term of KL where fast_exp read 0 (log P, or log Q where P = 0, below
// kFastExpLow): by glibc's exp, as their sums need them (a level of a few float32 subnormals,
// e.g. 2.1e-44, read 0 without).
inline void tiny_term(double lp, double lq, double* p, double* term) {
  if (lp == -kInfinity) {
    *term = std::exp(lq);  // Q where P = 0
    return;
  }
  const double l = lp - lq;
  const bool large = -l > kLargeExponent;
  *p = std::exp(lp);
  *term = kl_term(*p, l, large, large ? std::exp(lq) : 0.0, large ? 0.0 : fast_phi(-l));
}

// One pair into `pair` from its outputs' terms (output_terms; those of its m outputs at `at`,
// read in canonical order: order[k], the k-th output): the outputs with P > 0, their L, P and
// log P, KL and D_inf; or how its level is settled without a search. Its sums in canonical
// order, so that twins get the same bits. (Before: each output's exponentials taken again
// here; the first pass had them. Only those below fast_exp's range are: tiny_term.)
Settled prepare(const Terms& terms, int64_t at, const int* order, const float* log_P,
                const float* log_Q, int m, Pair& pair, double* heap_L, double* heap_P,
                double* heap_LP) {
  pair.size = 0;
  pair.l = m <= 64 ? pair.L : heap_L;
  pair.p = m <= 64 ? pair.P : heap_P;
  pair.lp = m <= 64 ? pair.LP : heap_LP;
  double* L = const_cast<double*>(pair.l);
  double* P = const_cast<double*>(pair.p);
  double* LP = const_cast<double*>(pair.lp);
  double kl = 0.0, d_inf = 0.0;
  int64_t flags = 0;
  for (int k = 0; k < m; ++k) {
    const int64_t e = at + order[k];
    const double lp = log_P[order[k]], lq = log_Q[order[k]];
    double p = terms.p[e], term = terms.kl[e];  // Q where P = 0 (in t KL), 0 where Q = 0 or NaN
    if ((lp < kFastExpLow && lp > -kInfinity) ||
        (lp == -kInfinity && lq < kFastExpLow && lq > -kInfinity))
      tiny_term(lp, lq, &p, &term);
    flags |= terms.flags[e];
    kl += term;
    if (!(terms.flags[e] & 4)) continue;
    const double l = terms.l[e];
    L[pair.size] = l;
    P[pair.size] = p;
    LP[pair.size] = lp;
    ++pair.size;
    d_inf = std::max(d_inf, l);
  }
  if (flags & 1) return Settled::kNaN;
  if (flags & 2) return Settled::kInfinite;
  if (!(d_inf > 0.0)) return Settled::kZero;  // P = Q on the support (no mass of P elsewhere)
  pair.kl = kl;
  pair.d_inf = d_inf;
  return Settled::kNo;
}

// One pair's summary from its m outputs' terms (at `at`): prepare()'s settlement and sums, the
// hash of its outputs summed, so that their order does not matter.
Settled summarize(const Terms& terms, int64_t at, int m, Summary& out) {
  double kl = 0.0, d_inf = 0.0, l_min = kInfinity, sum_p = 0.0, sum_pl = 0.0;
  uint64_t hash = 0;
  int flags = 0;
  for (int64_t e = at; e < at + m; ++e) {
    const double l = terms.l[e], p = terms.p[e];
    hash += terms.hash[e];
    flags |= terms.flags[e];
    kl += terms.kl[e];
    d_inf = std::max(d_inf, l);
    l_min = std::min(l_min, terms.flags[e] & 4 ? l : kInfinity);
    sum_p += p;
    sum_pl += p * l;
  }
  out.hash = hash;
  if (flags & 1) return Settled::kNaN;
  if (flags & 2) return Settled::kInfinite;
  if (!(d_inf > 0.0)) return Settled::kZero;
  out.kl = kl;
  out.d_inf = d_inf;
  out.l_min = l_min;
  out.sum_p = sum_p;
  out.sum_pl = sum_pl;
  return Settled::kNo;
}

// Above the level without a search. With A = max(1, sum P), d = KL - sum P L (the rows' float32
// normalization: 0 for exact rows) and mu = sum P L / sum P, the kernel's
// 1 + S(t) = sum P e^{tL} + 1 - sum P + t d, and under the weights P / sum P, L lies in
// [l_min, D_inf], so sum P e^{tL} <= (sum P) e^y with y = min(t mu+ + t^2 c, t D_inf) >= 0,
// c = (D_inf - l_min)^2 / 8 (Hoeffding's lemma); then (Bernoulli's inequality where sum P > 1)
// K(t) <= A y + t d+ and g(t) = K/(t(t + 1)) <= (A min(mu+ + t c, D_inf) + d+)/(t + 1). That is
// monotone on either side of t* = (D_inf - mu+)/c, so its sup is at t -> 0 or at t*. Plus
// |sum P - 1| (margin), and at least KL. (Before: max(mu, c), ~2.4 times as many pairs gridded.)
// Where sum P is 0 in double precision (every output with P > 0 below e^-700: fast_exp reads 0,
// while the search takes such a pair in logs) nothing is bounded: +inf (the pair is gridded).

// That ceiling of each of `count` summaries, in a loop that vectorizes (branch-free: a group's
// ceilings one at a time, their divisions waiting on one another, were ~5% of the kernel).
// Never NaN: the sort needs an order.
// (The summaries' fields as arrays, `count` long: GCC vectorizes no loop over an array of
// Summary.)
struct SummaryFields {
  const double *kl, *d_inf, *l_min, *sum_p, *sum_pl;
};

// A group's unsettled summaries, field by field (ceilings_of's arrays).
struct SummaryColumns {
  std::vector<double> kl, d_inf, l_min, sum_p, sum_pl;
  void resize(size_t n) {
    for (auto* column : {&kl, &d_inf, &l_min, &sum_p, &sum_pl}) column->resize(n);
  }
  void set(int64_t k, const Summary& s) {
    kl[k] = s.kl, d_inf[k] = s.d_inf, l_min[k] = s.l_min, sum_p[k] = s.sum_p;
    sum_pl[k] = s.sum_pl;
  }
  SummaryFields fields() const {
    return {kl.data(), d_inf.data(), l_min.data(), sum_p.data(), sum_pl.data()};
  }
};

void ceilings_of(const SummaryFields& s, int64_t count, double* out) {
  for (int64_t k = 0; k < count; ++k) {
    const double sum_p = s.sum_p[k], kl = s.kl[k], d_inf = s.d_inf[k];
    const bool some = sum_p > 0.0;
    const double a = std::max(1.0, sum_p);
    const double mu = std::max(s.sum_pl[k] / (some ? sum_p : 1.0), 0.0);
    const double drift = std::max(kl - s.sum_pl[k], 0.0);
    const double spread = d_inf - s.l_min[k];
    const double c = spread * spread / 8.0;
    const double low = a * std::min(mu, d_inf) + drift;
    const bool rising = c > 0.0 && d_inf > mu;
    const double t_star = (d_inf - mu) / (rising ? c : 1.0);
    const double at_star = (a * d_inf + drift) / (t_star + 1.0);
    const double top = rising ? std::max(low, at_star) : low;
    const double ceiling = top + std::fabs(sum_p - 1.0);
    out[k] = !some || std::isnan(ceiling) ? kInfinity : std::max(kl, ceiling);
  }
}

// One summary's (ceilings_of).
double ceiling_of(const Summary& s) {
  double ceiling;
  ceilings_of({&s.kl, &s.d_inf, &s.l_min, &s.sum_p, &s.sum_pl}, 1, &ceiling);
  return ceiling;
}

// The value and order of a settled pair.
void write_settled(Settled how, float* value, float* order) {
  *value = how == Settled::kNaN ? std::numeric_limits<float>::quiet_NaN()
           : how == Settled::kInfinite ? std::numeric_limits<float>::infinity() : 0.0f;
  *order = 0.0f;
}

// One pair's branch and bound over u: its points in increasing u, the bound of each interval
// between neighbours (bounds[j]: of [points[j], points[j + 1]]) and the best point.
struct Search {
  Point points[kMaxPoints];
  double bounds[kMaxPoints];
  int count = 0;
  int best = 0;
  bool unbounded = false;  // a point's value is not finite: no ceiling (ceiling_now)
};

// The first grid: kGrid orders from u = kLow to where the sup must lie (their bounds:
// searched_level).
void grid_points(const Pair& pair, Search& s) {
  // the sup lies in t <= max(2, D_inf/KL) - 1: beyond, D_alpha/alpha <= D_inf/alpha <= KL
  const double kl = pair.kl, d_inf = pair.d_inf;
  // high = log(top - 1), top = D_inf/KL within [2, kChordTop] (fast_log1p: no library call)
  const double top = std::clamp(kl > 0.0 ? d_inf / kl : kInfinity, 2.0, kChordTop);
  const double high = fast_log1p(top - 2.0);
  double ts[kGrid], gs[kGrid];
  double us[kGrid];
  for (int j = 0; j < kGrid; ++j) {
    us[j] = kLow + (high - kLow) * j / (kGrid - 1);
    ts[j] = fast_exp(us[j]);
  }
  for (int j = 0; j < kGrid; ++j) s.points[j] = {us[j], ts[j], 0.0};
  over_orders(pair, ts, kGrid, gs);
  s.count = kGrid;
  s.best = 0;
  s.unbounded = false;
  double highest = gs[0];
  for (int j = 0; j < kGrid; ++j) {  // the first of the highest values, without a branch
    s.points[j].g = gs[j];
    s.unbounded |= !std::isfinite(gs[j]);
    const bool higher = gs[j] > highest;
    highest = higher ? gs[j] : highest;
    s.best = higher ? j : s.best;
  }
}

constexpr double kPruneMargin = 1e-6;  // a ceiling below best / (1 + this) is skipped
constexpr double kLeastPruned = 1e-30;  // below, nothing is skipped (float32's spacing there)

// Whether a pair whose level is at most `ceiling` may reach `best` (the group's best level).
inline bool reaches(double ceiling, double best) {
  return best < kLeastPruned || !(ceiling * (1.0 + kPruneMargin) < best);
}

// The intervals of a search in one scan without a branch (its compares, mispredicted, were
// ~3% of the kernel): the widest, the first of the largest bounds (0 where bounds[0] is NaN),
// its bound, and whether every bound is a number >= 0.
struct Intervals {
  int widest;
  double top;
  bool bounded;
};

inline Intervals scan_intervals(const Search& s) {
  int widest = 0;
  double top = s.bounds[0];
  bool bounded = s.bounds[0] >= 0.0;
  for (int j = 1; j + 1 < s.count; ++j) {
    const double bound = s.bounds[j];
    const bool wider = bound > top;
    top = wider ? bound : top;
    widest = wider ? j : widest;
    bounded &= bound >= 0.0;
  }
  return {widest, top, bounded};
}

// Above every value the search from the points in `s` can return: KL, the points' values and
// the bound of each interval (s.bounds, scanned in `intervals`); +inf where a value or a bound
// is not a number (no bound: search it).
double ceiling_now(const Pair& pair, const Search& s, const Intervals& intervals) {
  if (s.unbounded || !intervals.bounded) return kInfinity;
  return std::max(std::max(pair.kl, s.points[s.best].g), intervals.top);
}

double ceiling_now(const Pair& pair, const Search& s) {
  return ceiling_now(pair, s, scan_intervals(s));
}

// The first grid's interval bounds (into s.bounds, which its search reads) and ceiling_now.
double grid_ceiling(const Pair& pair, Search& s) {
  interval_bounds(pair, s.points, s.count, s.bounds);
  return ceiling_now(pair, s);
}

// The search from the first grid (its bounds in s.bounds): the branch-and-bound rounds, then
// Newton's steps; rho (in double precision) and its order. In a group, with `floor` its best
// level so far: where after a round the pair's ceiling (ceiling_now) no longer reaches it, the
// pair cannot attain the group's max: -inf, and the rest of its search is skipped. Else the
// rounds and steps are those without a floor (which interval a round splits does not depend on
// it), and so is the value.
double finish(const Pair& pair, Search& s, float* order, double floor = -kInfinity) {
  Point* points = s.points;
  double* bounds = s.bounds;
  int& count = s.count;
  int& best = s.best;
  const double kl = pair.kl;
  // (a pair whose best point reaches the floor is never dropped: no ceiling to take)
  const auto abandoned = [&](const Intervals& intervals) {
    return floor > points[best].g && !reaches(ceiling_now(pair, s, intervals), floor);
  };
  for (int round = 0; round < kRounds; ++round) {
    const Intervals intervals = scan_intervals(s);
    if (round > 0 && abandoned(intervals)) return -kInfinity;
    const int widest = intervals.widest;
    const double target = std::max(points[best].g, kl);
    if (!(bounds[widest] > target * (1.0 + kTolerance))) break;
    // split [widest, widest + 1] (the interval of the largest bound) into kSplit + 1 equal
    // parts in u
    const Point a = points[widest], b = points[widest + 1];
    for (int j = count - 1; j > widest; --j) points[j + kSplit] = points[j];
    for (int j = count - 2; j > widest; --j) bounds[j + kSplit] = bounds[j];
    double ts[kSplit], gs[kSplit];
    for (int k = 1; k <= kSplit; ++k) {
      const double u = a.u + (b.u - a.u) * k / (kSplit + 1);
      ts[k - 1] = fast_exp(u);
      points[widest + k] = {u, ts[k - 1], 0.0};
    }
    over_orders(pair, ts, kSplit, gs);
    for (int k = 1; k <= kSplit; ++k) {
      points[widest + k].g = gs[k - 1];
      s.unbounded |= !std::isfinite(gs[k - 1]);
    }
    count += kSplit;
    // the first point of the highest value, as a scan of all of them finds it
    if (best > widest) best += kSplit;
    for (int j = widest + 1; j <= widest + kSplit; ++j) {  // without a branch
      const double held = points[best].g, g = points[j].g;
      best = (g > held) | ((g == held) & (j < best)) ? j : best;
    }
    // the new intervals' bounds in one vectorized call (four scalar calls: their divisions
    // waited on one another)
    interval_bounds(pair, points + widest, kSplit + 2, bounds + widest);
  }
  if (abandoned(scan_intervals(s))) return -kInfinity;
  // Newton's method on N(t) = 0 between the best point's neighbours, safeguarded: the bracket
  // keeps N > 0 (g rising) at its left end and N < 0 at its right, a step that leaves it or
  // goes uphill in N' is a bisection in u
  double lo = points[best > 0 ? best - 1 : 0].t, hi = points[best + 1 < count ? best + 1 : best].t;
  double t = points[best].t, g = points[best].g, at = -1.0;  // at: a step's t that beat g
  for (int step = 0; step < kNewtonSteps; ++step) {
    double gt, n, dn;
    with_slope(pair, t, true, &gt, &n, &dn);
    // (selects, not branches: their outcomes are data's)
    const bool higher = gt > g;
    g = higher ? gt : g;
    at = higher ? t : at;
    const bool rising = n > 0.0;
    lo = rising ? t : lo;
    hi = rising ? hi : t;
    const double newton = t - n / dn, bisection = std::sqrt(lo * hi);
    const bool inside = (dn < 0.0) & (newton > lo) & (newton < hi);
    const double next = inside ? newton : bisection;
    if (std::fabs(next - t) <= 1e-12 * t || !(hi > lo)) break;
    t = next;
  }
  if (kl >= g) {
    *order = -std::numeric_limits<float>::infinity();
    return kl;
  }
  *order = static_cast<float>(at > 0.0 ? std::log(at) : points[best].u);
  return g;
}

// Scratch space of one call: the pair's outputs beyond 64, a pair's outputs in canonical order,
// and a group's per-pair arrays (its representatives' canonical forms among them).
struct Scratch {
  std::vector<double> heap;        // 3m doubles where m > 64: Pair's L, P and log P
  std::vector<float> sorted;       // 2m floats: a pair's canonical log P, log Q
  std::vector<float> forms;        // group x 2m: representatives' canonical forms (twins)
  std::vector<char> formed;        // group: whether forms holds the pair's
  std::vector<int> index;          // m: the canonical order
  std::vector<uint64_t> hashes;    // group
  std::vector<int64_t> pending, same, open;
  std::vector<int64_t> table;      // the twins' hash table
  std::vector<double> ceilings;
  SummaryColumns summaries;        // group: the unsettled pairs' summaries, in pending order
  std::vector<double> pending_ceilings;
  Terms terms;                     // group x m (m for one pair): the outputs' terms
  double* heap_L() { return heap.empty() ? nullptr : heap.data(); }
  double* heap_P() { return heap.empty() ? nullptr : heap.data() + heap.size() / 3; }
  double* heap_LP() { return heap.empty() ? nullptr : heap.data() + 2 * heap.size() / 3; }
};

using jaxpriv_twins::canonical;
using jaxpriv_twins::canonical_order;

// rho (double precision) and its order for a pair that prepare() left unsettled, from its
// first grid's points in `s` (grid_points): the grid's bounds, the branch and bound, Newton's
// steps.
double searched_level(const Pair& pair, Search& s, float* order) {
  interval_bounds(pair, s.points, s.count, s.bounds);
  return finish(pair, s, order);
}

// rho and its order for one pair of m outputs (float32 logs, -inf for a zero).
void one_pair(const float* log_P, const float* log_Q, int m, Pair& pair, Scratch& scratch,
              float* value, float* order) {
  canonical_order(log_P, log_Q, m, scratch.index.data());
  output_terms(log_P, log_Q, m, scratch.terms, false);
  const Settled how = prepare(scratch.terms, 0, scratch.index.data(), log_P, log_Q, m, pair,
                              scratch.heap_L(), scratch.heap_P(), scratch.heap_LP());
  if (how != Settled::kNo) return write_settled(how, value, order);
  Search s;
  grid_points(pair, s);
  *value = static_cast<float>(searched_level(pair, s, order));
}

constexpr double kBelowKl = 1.0 - 1e-12;  // a skipped pair's KL from its summary, rounded down

// A group of `size` pairs (the ordered pairs of one mechanism's rows) whose max is what is
// wanted, each pair settled as cheaply as the others allow. First each pair's summary (its
// outputs in the given order: settled or not, KL, the ceiling of ceiling_of and a hash of its
// outputs); of the pairs whose ceiling, raised by kPruneMargin, reaches the best KL, those
// equal in canonical order (canonical: equal hashes, then confirmed) are solved once. Then, in
// order of decreasing ceiling while one reaches the best level so far, the pair in canonical
// order and its first grid of orders; and its search where that grid's ceiling (grid_ceiling)
// still reaches the best level, which its grid may have raised. (Before: every such pair's grid
// first, then the searches: the same pairs searched, a second prepare() of each, its grid kept
// between.) A searched pair's value and order are one_pair's (it is in the same canonical
// order); a skipped pair reads its KL (rounded down) and the order -inf: a lower bound of its
// level, below the best by a factor 1 + kPruneMargin in double precision, so below the group's
// max in float32 too. So the max over the group, and which pairs attain it, are one_pair's.
void group_of_pairs(const float* log_P, const float* log_Q, int m, int64_t size, Pair& pair,
                    Scratch& scratch, float* value, float* order) {
  uint64_t* hashes = scratch.hashes.data();
  int64_t* pending = scratch.pending.data();  // the unsettled pairs, in index order
  int64_t* same = scratch.same.data();
  int64_t* open = scratch.open.data();
  double* ceilings = scratch.ceilings.data();
  float* mine = scratch.sorted.data();  // 2m floats: a pair's canonical logs
  const auto in_P = [&](int64_t i) { return log_P + i * m; };
  const auto in_Q = [&](int64_t i) { return log_Q + i * m; };
  const auto by_ceiling = [&](int64_t a, int64_t b) { return ceilings[a] > ceilings[b]; };
  double best = -kInfinity;
  int64_t unsettled = 0;
  Summary summary;
  output_terms(log_P, log_Q, size * m, scratch.terms);
  for (int64_t i = 0; i < size; ++i) {
    same[i] = i;
    const Settled how = summarize(scratch.terms, i * m, m, summary);
    if (how != Settled::kNo) {
      write_settled(how, value + i, order + i);
      if (how != Settled::kNaN) best = std::max(best, static_cast<double>(value[i]));
      continue;
    }
    value[i] = static_cast<float>(summary.kl * kBelowKl);
    order[i] = -std::numeric_limits<float>::infinity();
    best = std::max(best, summary.kl * kBelowKl);
    hashes[i] = summary.hash;
    scratch.summaries.set(unsettled, summary);
    pending[unsettled++] = i;
  }
  ceilings_of(scratch.summaries.fields(), unsettled, scratch.pending_ceilings.data());
  for (int64_t k = 0; k < unsettled; ++k) ceilings[pending[k]] = scratch.pending_ceilings[k];
  // the pairs whose ceiling reaches the best KL, less twins: equal hashes (an open-addressing
  // table of those pairs, in index order), confirmed in canonical order
  size_t slots = 16;
  while (slots < 2 * static_cast<size_t>(unsettled)) slots *= 2;
  scratch.table.assign(slots, -1);
  int64_t* table = scratch.table.data();
  int64_t opened = 0;
  // a representative's canonical form, sorted once when first compared (a randomized
  // response's 11 twins of one pair sorted it 11 times, a tenth of the kernel on the sweep's
  // mechanisms: 3.2 twins a mechanism)
  std::fill(scratch.formed.begin(), scratch.formed.end(), 0);
  const auto form_of = [&](int64_t r) {
    float* form = scratch.forms.data() + r * 2 * m;
    if (!scratch.formed[r]) canonical(in_P(r), in_Q(r), m, scratch.index.data(), form, form + m);
    scratch.formed[r] = 1;
    return form;
  };
  for (int64_t k = 0; k < unsettled; ++k) {
    const int64_t i = pending[k];
    // a pair that cannot reach the best KL is skipped whether it has a twin or not: no
    // twin is looked for (confirming one sorts the pairs' outputs)
    if (!reaches(ceilings[i], best)) continue;
    size_t at = hashes[i] & (slots - 1);
    bool sorted = false;  // whether `mine` holds pair i's canonical form
    for (; table[at] >= 0; at = (at + 1) & (slots - 1)) {
      const int64_t r = table[at];  // r < i
      if (hashes[r] != hashes[i]) continue;
      if (!sorted) canonical(in_P(i), in_Q(i), m, scratch.index.data(), mine, mine + m);
      sorted = true;
      if (std::memcmp(mine, form_of(r), 2 * m * sizeof(float)) == 0) {
        same[i] = r;
        break;
      }
    }
    if (same[i] != i) continue;
    if (sorted) {  // kept for its own twins
      std::memcpy(scratch.forms.data() + i * 2 * m, mine, 2 * m * sizeof(float));
      scratch.formed[i] = 1;
    }
    table[at] = i;
    open[opened++] = i;
  }
  std::sort(open, open + opened, by_ceiling);
  for (int64_t k = 0; k < opened && reaches(ceilings[open[k]], best); ++k) {
    const int64_t i = open[k];
    canonical_order(in_P(i), in_Q(i), m, scratch.index.data());
    prepare(scratch.terms, i * m, scratch.index.data(), in_P(i), in_Q(i), m, pair,
            scratch.heap_L(), scratch.heap_P(), scratch.heap_LP());
    Search s;
    grid_points(pair, s);
    best = std::max(best, s.points[s.best].g);  // a lower bound of the pair's level
    if (!reaches(grid_ceiling(pair, s), best)) continue;  // (at least that point's, or +inf)
    float at;
    const double level = finish(pair, s, &at, best);
    if (level == -kInfinity) continue;  // it cannot attain the max: its KL stays
    value[i] = static_cast<float>(level);
    order[i] = at;
    best = std::max(best, level);
  }
  for (int64_t i = 0; i < size; ++i)
    if (same[i] != i) value[i] = value[same[i]], order[i] = order[same[i]];
}

ffi::Error ZcdpOrders(ffi::Buffer<ffi::F32> log_P, ffi::Buffer<ffi::F32> log_Q,
                      ffi::ResultBuffer<ffi::F32> value, ffi::ResultBuffer<ffi::F32> order,
                      int64_t group) {
  const auto dims = log_P.dimensions();
  if (dims.size() < 1) return ffi::Error::InvalidArgument("log_P must have shape (..., m)");
  const int64_t m = dims[dims.size() - 1];
  if (m < 1) return ffi::Error::InvalidArgument("the pairs need m >= 1 outputs");
  const int64_t count = static_cast<int64_t>(log_P.element_count()) / m;
  if (log_Q.element_count() != log_P.element_count() ||
      static_cast<int64_t>(value->element_count()) != count ||
      static_cast<int64_t>(order->element_count()) != count)
    return ffi::Error::InvalidArgument("log_P, log_Q and the results must match");
  if (group < 1 || count % group != 0)
    return ffi::Error::InvalidArgument("group must be >= 1 and divide the number of pairs");
  Scratch scratch;
  if (m > 64) scratch.heap.resize(3 * m);
  scratch.sorted.resize(2 * m);
  scratch.index.resize(m);
  Pair pair;
  const float* p = log_P.typed_data();
  const float* q = log_Q.typed_data();
  float* v = value->typed_data();
  float* o = order->typed_data();
  const int mm = static_cast<int>(m);
  if (group == 1) {
    scratch.terms.resize(m);
    for (int64_t i = 0; i < count; ++i) one_pair(p + i * m, q + i * m, mm, pair, scratch, v + i, o + i);
    return ffi::Error::Success();
  }
  scratch.forms.resize(group * 2 * m);
  scratch.formed.resize(group);
  scratch.hashes.resize(group);
  scratch.pending.resize(group);
  scratch.same.resize(group);
  scratch.open.resize(group);
  scratch.ceilings.resize(group);
  scratch.summaries.resize(group);
  scratch.pending_ceilings.resize(group);
  scratch.terms.resize(group * m);
  for (int64_t first = 0; first < count; first += group)
    group_of_pairs(p + first * m, q + first * m, mm, group, pair, scratch, v + first, o + first);
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxprivZcdpOrders, ZcdpOrders,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Attr<int64_t>("group"));
