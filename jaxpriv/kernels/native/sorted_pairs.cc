// Pair levels that sort each pair's outputs by likelihood ratio, for float32 pairs (P, Q), each
// pair in double precision: jaxpriv.kernels.pair_levels' float32 path on the CPU (SPEC §5).
//
// eps_at_delta, the least eps >= 0 with delta(eps) <= delta, as
// jaxpriv.core.pair_notions.eps_at_delta_pair computes it: delta(eps) = max_k (A_k - e^eps B_k)
// over the prefix sums A_k, B_k of P, Q with the outputs sorted by log(P/Q) descending, so
// eps = max(0, max over prefixes with A_k > delta of log((A_k - delta)/B_k)), +inf where such a
// prefix has B_k = 0.
//
// gdp, the least mu >= 0 with T(P, Q) >= G_mu (Dong, Roth, Su 2022, Def. 2.6), as
// jaxpriv.core.pair_notions.gdp_pair computes it: mu = max_k Phi^-1(Q(S_k)) - Phi^-1(P(S_k)) over
// the prefixes S_k of the outputs sorted by log(Q/P) descending, each probit taken from the
// smaller of a prefix sum and its complement's own sum; Phi^-1 by Acklam's rational
// approximation (1.2e-9), the best vertex's refined by one Halley step on erfc (double precision).
// A pair with an entry below e^-700 is taken in logs throughout (sums by running
// log-sum-exps, Phi^-1 from log p): its sums can be subnormal, which XLA's threads flush to 0
// (Phi^-1(5.3e-320) = -38.06 read -inf, mu = inf for a finite 47.6).
//
// Why by hand: XLA:CPU sorts each pair's short axis of outputs with a general sort; here each
// pair is a scalar loop (an insertion sort of its m keys), ~0.1 us a pair. NaN in, NaN out.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <vector>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

struct Entry {
  double key, p, q, log_p, log_q;
};

// Below this log a probability, or a sum of such, may be subnormal in double.
constexpr double kTinyLog = -700.0;

// A running log-sum-exp: log of the sum of e^l over the l added (-inf while none is finite).
struct LogSum {
  double top = -kInf, scaled = 0.0;  // the sum is e^top * scaled
  void add(double l) {
    if (l > top) {
      scaled = scaled * std::exp(top - l) + 1.0;
      top = l;
    } else if (l > -kInf) {
      scaled += std::exp(l - top);
    }
  }
  double log() const { return top == -kInf ? -kInf : top + std::log(scaled); }
};

// The outputs with P's and Q's probabilities (double; subnormal ones may flush to 0 on XLA's
// threads) and logs, insertion-sorted by log(P/Q) descending (`q_over_p`: by log(Q/P)
// descending); false where an input is NaN. `tiny`: whether an entry is below e^kTinyLog.
bool sorted_entries(const float* log_P, const float* log_Q, int m, bool q_over_p,
                    Entry* entries, bool* tiny = nullptr) {
  bool small = false;
  for (int i = 0; i < m; ++i) {
    const double lp = log_P[i], lq = log_Q[i];
    if (std::isnan(lp) || std::isnan(lq)) return false;
    small = small || (lp > -kInf && lp < kTinyLog) || (lq > -kInf && lq < kTinyLog);
    const bool has_p = lp > -kInf, has_q = lq > -kInf;
    const double key = q_over_p ? (has_p && has_q ? lq - lp : (has_q ? kInf : -kInf))
                                : (has_p && has_q ? lp - lq : (has_p ? kInf : -kInf));
    Entry e{key, has_p ? std::exp(lp) : 0.0, has_q ? std::exp(lq) : 0.0, lp, lq};
    int j = i;
    while (j > 0 && entries[j - 1].key < e.key) {
      entries[j] = entries[j - 1];
      --j;
    }
    entries[j] = e;
  }
  if (tiny != nullptr) *tiny = small;
  return true;
}

float one_pair(const float* log_P, const float* log_Q, int m, double delta, Entry* entries) {
  if (std::isnan(delta)) return std::numeric_limits<float>::quiet_NaN();
  bool tiny = false;
  if (!sorted_entries(log_P, log_Q, m, false, entries, &tiny))
    return std::numeric_limits<float>::quiet_NaN();
  // the largest log(A_k - delta) - log B_k (at least 0: eps >= 0)
  double A = 0.0, best = 0.0;
  if (!tiny) {
    // every Q entry is 0 or at least e^-700: B_k is a sum of normal doubles, never subnormal.
    // log is increasing: the log of the largest ratio (one log per pair, not one per output)
    double B = 0.0, ratio = 1.0;
    for (int k = 0; k < m; ++k) {
      A += entries[k].p;
      B += entries[k].q;
      if (A > delta) {
        if (B == 0.0) return std::numeric_limits<float>::infinity();
        ratio = std::max(ratio, (A - delta) / B);
      }
    }
    return static_cast<float>(std::log(ratio));
  }
  // an entry below e^-700: log B_k by a running log-sum-exp of log Q (B itself underflows below
  // e^-708, and XLA's threads flush subnormals: B = 0 would read eps = inf for a finite eps of
  // ~736): an exp per output (taken by every pair, this path cost D6's sweep a third)
  LogSum B;
  for (int k = 0; k < m; ++k) {
    A += entries[k].p;
    B.add(entries[k].log_q);
    if (A > delta) {
      if (B.top == -kInf) return std::numeric_limits<float>::infinity();
      const double candidate = std::log(A - delta) - B.log();
      if (candidate > best) best = candidate;
    }
  }
  return static_cast<float>(best);
}

// Acklam's approximation of Phi^-1(p) in the lower tail (p < 0.02425), from q = sqrt(-2 log p).
inline double acklam_tail(double q) {
  static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01,
                             -2.400758277161838e+00, -2.549732539343734e+00,
                             4.374664141464968e+00,  2.938163982698783e+00};
  static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01,
                             2.445134137142996e+00, 3.754408661907416e+00};
  return (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
         ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1.0);
}

// Phi^-1(p) for p in [0, 1] (-inf at 0, +inf at 1); `refine`: one Halley step on erfc after
// Acklam's approximation (relative error 1.2e-9 -> ~1e-15).
double ndtri(double p, bool refine) {
  if (!(p > 0.0)) return p == 0.0 ? -kInf : std::numeric_limits<double>::quiet_NaN();
  if (!(p < 1.0)) return p == 1.0 ? kInf : std::numeric_limits<double>::quiet_NaN();
  static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,
                             -2.759285104469687e+02, 1.383577518672690e+02,
                             -3.066479806614716e+01, 2.506628277459239e+00};
  static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02,
                             -1.556989798598866e+02, 6.680131188771972e+01,
                             -1.328068155288572e+01};
  const bool upper = p > 0.5;
  const double tail = upper ? 1.0 - p : p;  // the caller passes p <= 0.5 for accuracy
  double x;
  if (tail < 0.02425) {
    x = acklam_tail(std::sqrt(-2.0 * std::log(tail)));
  } else {
    const double q = tail - 0.5, r = q * q;
    x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1.0);
  }
  if (!refine) return upper ? -x : x;
  // one Halley step on Phi(x) = tail
  const double e = 0.5 * std::erfc(-x / std::sqrt(2.0)) - tail;
  const double u = e * 2.5066282746310002 * std::exp(0.5 * x * x);  // e sqrt(2 pi) e^{x^2/2}
  if (std::isfinite(u)) x -= u / (1.0 + 0.5 * x * u);
  return upper ? -x : x;
}

// Phi^-1 of a probability given it and its complement, each from its own sum.
inline double probit(double x, double complement, bool refine) {
  return x > 0.5 ? -ndtri(complement, refine) : ndtri(x, refine);
}

// Phi^-1(e^l) for l <= log(1/2): below kTinyLog from l itself (Acklam's tail form takes
// sqrt(-2 l)), refined by Newton steps on log Phi(x) = l with Phi's asymptotic series
// log Phi(x) = -x^2/2 - log(-x) - log(2 pi)/2 + log(1 - 1/x^2 + 3/x^4 - 15/x^6 + 105/x^8),
// whose next term is below 1e-12 here (x < -37).
double ndtri_log(double l, bool refine) {
  if (l == -kInf) return -kInf;
  if (l > kTinyLog) return ndtri(std::exp(l), refine);
  double x = acklam_tail(std::sqrt(-2.0 * l));
  for (int step = 0; step < (refine ? 3 : 0); ++step) {
    const double r = 1.0 / (x * x);
    const double series = 1.0 - r * (1.0 - 3.0 * r * (1.0 - 5.0 * r * (1.0 - 7.0 * r)));
    const double log_cdf = -0.5 * x * x - std::log(-x) - 0.9189385332046728 + std::log(series);
    x -= (log_cdf - l) * series / (-x);  // d log Phi/dx = phi/Phi ~ -x / series
  }
  return x;
}

// Phi^-1 of a probability given the logs of it and of its complement.
inline double probit_log(double log_x, double log_complement, bool refine) {
  return log_x > log_complement ? -ndtri_log(log_complement, refine)
                                : ndtri_log(log_x, refine);
}

// gdp_pair of a pair with an entry below e^kTinyLog: every sum a log-sum-exp, every probit
// from a log (the sorted entries given; suffix_p, suffix_q hold the suffixes' logs).
float gdp_pair_in_logs(const Entry* entries, int m, double* suffix_p, double* suffix_q) {
  LogSum sp, sq;
  for (int k = m - 1; k >= 0; --k) {
    suffix_p[k] = sp.log();
    suffix_q[k] = sq.log();
    sp.add(entries[k].log_p);
    sq.add(entries[k].log_q);
  }
  LogSum P_in, Q_in;
  double best = 0.0, best_P = 0.0, best_Q = 0.0, best_P_out = 0.0, best_Q_out = 0.0;
  bool found = false;
  for (int k = 0; k < m; ++k) {
    P_in.add(entries[k].log_p);
    Q_in.add(entries[k].log_q);
    const double lp = P_in.log(), lq = Q_in.log(), lp_out = suffix_p[k], lq_out = suffix_q[k];
    if ((lp == -kInf && lq == -kInf) || (lp_out == -kInf && lq_out == -kInf)) continue;
    const double mu = probit_log(lq, lq_out, false) - probit_log(lp, lp_out, false);
    if (std::isnan(mu)) continue;
    if (mu == kInf) return std::numeric_limits<float>::infinity();
    if (mu > best) {
      best = mu, found = true;
      best_P = lp, best_Q = lq, best_P_out = lp_out, best_Q_out = lq_out;
    }
  }
  if (!found) return 0.0f;
  const double mu = probit_log(best_Q, best_Q_out, true) - probit_log(best_P, best_P_out, true);
  return static_cast<float>(std::max(mu, 0.0));
}

// `best`: in a group, the largest level solved so far (-1 before): a pair whose best vertex,
// before its refinement, is clearly below it (by 1e-6 relative and 1e-7: Acklam's 1.2e-9
// relative on probits of magnitude below 40) cannot be the group's max and reads -1 (skipped:
// the caller writes 0, and does not keep it as the pair's level for another group).
float gdp_pair(const float* log_P, const float* log_Q, int m, Entry* entries, double* suffix_p,
               double* suffix_q, double best_level = -1.0) {
  bool tiny = false;
  if (!sorted_entries(log_P, log_Q, m, true, entries, &tiny))
    return std::numeric_limits<float>::quiet_NaN();
  if (tiny) return gdp_pair_in_logs(entries, m, suffix_p, suffix_q);
  // suffix_p[k] = sum_{j > k} P_j, summed (a tail of 1e-19 behind 0.3 is kept)
  double sp = 0.0, sq = 0.0;
  for (int k = m - 1; k >= 0; --k) {
    suffix_p[k] = sp;
    suffix_q[k] = sq;
    sp += entries[k].p;
    sq += entries[k].q;
  }
  // every vertex by Acklam's approximation alone (1e-9), the best one again refined
  double P_in = 0.0, Q_in = 0.0, best = 0.0;
  double best_P = -1.0, best_Q = 0.0, best_P_out = 0.0, best_Q_out = 0.0;
  for (int k = 0; k < m; ++k) {
    P_in += entries[k].p;
    Q_in += entries[k].q;
    const double P_out = suffix_p[k], Q_out = suffix_q[k];
    if ((P_in <= 0.0 && Q_in <= 0.0) || (P_out <= 0.0 && Q_out <= 0.0)) continue;
    const double mu = probit(Q_in, Q_out, false) - probit(P_in, P_out, false);
    if (std::isnan(mu)) continue;  // inf - inf: both tails empty, not a vertex
    if (mu == kInf) return std::numeric_limits<float>::infinity();
    if (mu > best) {
      best = mu;
      best_P = P_in, best_Q = Q_in, best_P_out = P_out, best_Q_out = Q_out;
    }
  }
  if (best_P < 0.0) return 0.0f;
  if (best + 1e-6 * best + 1e-7 < best_level) return -1.0f;
  const double mu = probit(best_Q, best_Q_out, true) - probit(best_P, best_P_out, true);
  return static_cast<float>(std::max(mu, 0.0));
}

// The number of pairs of (log_P, log_Q), shaped (..., m) alike, and m; an error where they or
// the per-pair buffers (`sizes`: their element counts) do not match, or `group` does not divide
// the pairs.
ffi::Error pair_shape(const ffi::Buffer<ffi::F32>& log_P, const ffi::Buffer<ffi::F32>& log_Q,
                      std::initializer_list<size_t> sizes, int64_t group, int64_t* count_out,
                      int64_t* m_out) {
  const auto dims = log_P.dimensions();
  if (dims.size() < 1) return ffi::Error::InvalidArgument("log_P must have shape (..., m)");
  const int64_t m = dims[dims.size() - 1];
  if (m < 1) return ffi::Error::InvalidArgument("the pairs need m >= 1 outputs");
  const int64_t count = static_cast<int64_t>(log_P.element_count()) / m;
  bool match = log_Q.element_count() == log_P.element_count();
  for (size_t size : sizes) match = match && static_cast<int64_t>(size) == count;
  if (!match) return ffi::Error::InvalidArgument("log_P, log_Q and the per-pair buffers must match");
  if (group < 1 || count % group != 0)
    return ffi::Error::InvalidArgument("group must be a positive divisor of the pairs");
  *count_out = count;
  *m_out = m;
  return ffi::Error::Success();
}

// D_inf(P || Q) of a pair, in double: above its eps(delta) for every delta (each prefix's
// (A - delta) / B <= A / B <= max P/Q); +inf where Q = 0 < P somewhere or an input is NaN (such a
// pair is always solved).
double max_log_ratio(const float* log_P, const float* log_Q, int m) {
  double top = 0.0;
  for (int i = 0; i < m; ++i) {
    const double lp = log_P[i], lq = log_Q[i];
    if (std::isnan(lp) || std::isnan(lq)) return kInf;
    if (lp == -kInf) continue;
    if (lq == -kInf) return kInf;
    top = std::max(top, lp - lq);
  }
  return top;
}

// The largest D_inf at which randomized response's GDP level, mu_RR(eps) = 2 Phi^-1(e^eps /
// (1 + e^eps)), is below mu: log(Phi(mu/2) / Phi(-mu/2)), less a relative 1e-6 to spare (a pair
// whose D_inf in both directions is below it has a GDP level below mu: its trade-off curve is
// above eps-DP's, which is above G_mu exactly where mu >= mu_RR(eps), the curves meeting at
// eps-DP's kink; Dong, Roth, Su 2022, Prop. 2.5 / Cor. 2.13).
double rr_gdp_threshold(double mu) {
  if (!(mu > 0.0)) return -kInf;
  if (mu == kInf) return kInf;
  const double x = mu / (2.0 * std::sqrt(2.0));
  // beyond, erfc(x) nears double's subnormal range (x ~ 26) and its log loses precision: no
  // pair is skipped (float32 pairs reach mu ~ 40 at most: D_inf <= ~190)
  if (x > 20.0) return -kInf;
  // log((1 + erf x) / (1 - erf x)) = 2 atanh(erf x): no cancellation at small mu
  const double t = x < 1.0 ? 2.0 * std::atanh(std::erf(x))
                           : std::log(std::erfc(-x)) - std::log(std::erfc(x));
  if (!std::isfinite(t)) return -kInf;
  return t - 1e-6 * std::fabs(t);
}

// Every pair's level (`group` 1: solve(i, -1) for each), or with group > 1 each group's max: a
// group's pairs are solved in decreasing order of `bound(i)` (an upper bound of pair i's level;
// equal bounds by `tie(i)`, then in index order), and a pair whose bound is below
// `limit(best)`, best the largest level solved so far in its group, reads 0 (below the group's
// max); solve(i, best) may read 0 too where it finds the pair below the best. The order by
// ranks, each the count of the pairs before it, in loops without a branch (std::sort of a
// mechanism's 12 pairs, its comparisons mispredicted, was ~15% of the eps(delta) kernel's
// time); std::stable_sort beyond 64 pairs.
template <typename Bound, typename Tie, typename Solve, typename Limit>
void solve_groups(int64_t count, int64_t group, float* out, Bound bound_of, Tie tie_of,
                  Solve solve, Limit limit) {
  if (group == 1) {
    for (int64_t i = 0; i < count; ++i) out[i] = solve(i, -1.0);
    return;
  }
  std::vector<double> bound(group);
  std::vector<uint64_t> tie(group);
  std::vector<int64_t> order(group);
  for (int64_t start = 0; start < count; start += group) {
    for (int64_t j = 0; j < group; ++j) {
      bound[j] = bound_of(start + j);  // never NaN
      tie[j] = tie_of(start + j);
    }
    if (group <= 64) {
      for (int64_t j = 0; j < group; ++j) {
        const double b = bound[j];
        const uint64_t t = tie[j];
        int64_t rank = 0;
        for (int64_t k = 0; k < group; ++k)
          rank += (bound[k] > b) | ((bound[k] == b) & ((tie[k] < t) | ((tie[k] == t) & (k < j))));
        order[rank] = j;
      }
    } else {
      for (int64_t j = 0; j < group; ++j) order[j] = j;
      std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) {
        return bound[x] > bound[y] || (bound[x] == bound[y] && tie[x] < tie[y]);
      });
    }
    float best = -1.0f;  // none solved yet (every level is >= 0)
    double below = -kInf;
    for (int64_t j : order) {
      const int64_t i = start + j;
      if (bound[j] < below) {
        out[i] = 0.0f;
        continue;
      }
      out[i] = solve(i, static_cast<double>(best));
      if (out[i] > best) {
        best = out[i];
        below = limit(static_cast<double>(best));
      }
    }
  }
}

// A key of the pair (P, Q) that (Q, P) shares: each output's two bits, the smaller first, mixed
// with its place. GDP's equal bounds are ordered by it, so that a pair and its reverse are
// solved one after the other (the second read, not solved) where many pairs share a bound (a
// randomized response's); pairs that share it otherwise only lose that.
inline uint64_t symmetric_key(const float* log_P, const float* log_Q, int m) {
  uint64_t key = 0;
  for (int i = 0; i < m; ++i) {
    uint32_t a, b;
    std::memcpy(&a, log_P + i, sizeof a);
    std::memcpy(&b, log_Q + i, sizeof b);
    const uint64_t both = (static_cast<uint64_t>(std::min(a, b)) << 32) | std::max(a, b);
    key = (key ^ both) * 0x9e3779b97f4a7c15ULL + static_cast<uint64_t>(i);
  }
  return key;
}

// The GDP level of every pair; with group > 1, of each group of `group` consecutive pairs (a
// mechanism's) only the max is wanted: the pairs are solved in decreasing order of their
// symmetric D_inf, and a pair whose randomized-response bound mu_RR(D_inf) is below the best mu
// found reads 0 (below the max); the max is the per-pair kernel's.
//
// GDP is symmetric: T(Q, P) = T(P, Q)^-1, the reflection of T(P, Q) in the diagonal, and G_mu
// is its own reflection (Dong, Roth, Su 2022, Sec. 2), so T(P, Q) >= G_mu iff T(Q, P) >= G_mu:
// a pair and its reverse have one level (each vertex's mu, -Phi^-1(alpha) - Phi^-1(beta), is
// symmetric in the vertex's two errors; tests/test_native_pair_levels.py checks it against the
// float64 reference both ways). Each pair is
// solved in one direction, the one whose log P is first in byte order, so that (P, Q) and (Q, P)
// read the same bits; and a pair equal in those bits to the last one solved (its reverse, next
// to it in the order of the bound) is not solved again.
ffi::Error Gdp(ffi::Buffer<ffi::F32> log_P, ffi::Buffer<ffi::F32> log_Q,
               ffi::ResultBuffer<ffi::F32> mu, int64_t group) {
  int64_t count, m;
  const ffi::Error shape = pair_shape(log_P, log_Q, {mu->element_count()}, group, &count, &m);
  if (shape.failure()) return shape;
  std::vector<Entry> entries(m);
  std::vector<double> suffix(2 * m);
  const float* p = log_P.typed_data();
  const float* q = log_Q.typed_data();
  float* out = mu->typed_data();
  const int mm = static_cast<int>(m);
  std::vector<float> last(2 * m);  // the last pair solved, in its direction, and its level
  bool solved = false;
  float last_mu = 0.0f;
  double skipped_at = -kInf;  // or the best below which the last pair was skipped (read 0)
  solve_groups(
      count, group, out,
      [&](int64_t i) {
        return std::max(max_log_ratio(p + i * m, q + i * m, mm),
                        max_log_ratio(q + i * m, p + i * m, mm));
      },
      [&](int64_t i) { return symmetric_key(p + i * m, q + i * m, mm); },
      [&](int64_t i, double best) {
        const float* first = p + i * m;
        const float* second = q + i * m;
        if (std::memcmp(first, second, m * sizeof(float)) > 0) std::swap(first, second);
        if (solved && std::memcmp(first, last.data(), m * sizeof(float)) == 0 &&
            std::memcmp(second, last.data() + m, m * sizeof(float)) == 0) {
          if (skipped_at == -kInf) return last_mu;
          // skipped below a best this group has reached too (in any group): still below it
          if (best >= skipped_at) return 0.0f;
        }
        const float mu = gdp_pair(first, second, mm, entries.data(), suffix.data(),
                                  suffix.data() + m, best);
        std::copy(first, first + m, last.begin());
        std::copy(second, second + m, last.begin() + m);
        solved = true;
        skipped_at = mu < 0.0f ? best : -kInf;
        last_mu = mu < 0.0f ? 0.0f : mu;
        return last_mu;
      },
      rr_gdp_threshold);
  return ffi::Error::Success();
}


// eps(delta) of every pair; with group > 1, of each group of `group` consecutive pairs (a
// mechanism's) only the max is wanted: the pairs are solved in decreasing order of D_inf, and a
// pair whose D_inf is below the best eps found reads 0 (its eps is at most its D_inf, so below
// the max; the float value too, rounding being monotone). The max is the per-pair kernel's.
ffi::Error EpsAtDelta(ffi::Buffer<ffi::F32> log_P, ffi::Buffer<ffi::F32> log_Q,
                      ffi::Buffer<ffi::F32> delta, ffi::ResultBuffer<ffi::F32> eps,
                      int64_t group) {
  int64_t count, m;
  const ffi::Error shape = pair_shape(log_P, log_Q, {delta.element_count(), eps->element_count()},
                                      group, &count, &m);
  if (shape.failure()) return shape;
  std::vector<Entry> entries(m);
  const float* p = log_P.typed_data();
  const float* q = log_Q.typed_data();
  const float* d = delta.typed_data();
  float* out = eps->typed_data();
  const int mm = static_cast<int>(m);
  solve_groups(
      count, group, out,
      [&](int64_t i) {
        // the bound holds for delta >= 0 only: any other delta (NaN, negative) is solved
        return d[i] >= 0.0f ? max_log_ratio(p + i * m, q + i * m, mm) : kInf;
      },
      [](int64_t) { return uint64_t{0}; },  // equal bounds in index order
      [&](int64_t i, double) { return one_pair(p + i * m, q + i * m, mm, d[i], entries.data()); },
      [](double best) { return best; });
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxprivEpsAtDelta, EpsAtDelta,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Attr<int64_t>("group"));

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxprivGdp, Gdp,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Attr<int64_t>("group"));
