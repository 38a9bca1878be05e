// The composed eps(delta) of k uses of a mechanism, max over ordered pairs of secrets, exactly,
// each mechanism in double precision: jaxpriv.kernels.composed's path on the CPU (SPEC §6).
//
// The algorithm is jaxpriv.core.composition_tails', step for step:
//  * one pair's k-fold privacy-loss distribution as the outer count vectors of m - 1 slots
//    (the counts of outputs 0 .. m-3 and r, the uses of the last two outputs a, b together),
//    the split of r between a and b held in binomial-tail tables T_r(t) built by the scaled
//    recurrence U_r(t) = U_{r-1}(t-1) + (1 - pi) U_{r-1}(t) (sums of non-negative terms);
//  * the P- and Q-mass of the losses above eps as one table lookup per outer vector;
//  * the search: a bracket [lo, hi] and the live atoms above each end, halvings until the
//    segment step (log(A - delta) - log B on the segment above lo) reaches past the middle,
//    then segment steps, stopping when no atom lies between;
//  * the max over the ordered pairs solving only the pairs whose Renyi bound (Canonne, Kamath,
//    Steinke 2020, arXiv:2004.00010, Prop. 12) exceeds the best eps so far, in order of
//    decreasing bound, each from that best as its floor and its bound as its ceiling; each
//    pair's outputs in a canonical order (by log P, then log Q), so that pairs equal up to a
//    permutation of the outputs (all of a randomized response's) are solved once.
//
// Why by hand: XLA runs those searches in step across a batch (a while loop waits for its
// slowest mechanism, a gather per lookup); here each mechanism runs alone. And where every
// atom's mass is well inside double's range ((2k + 2) g <= 700 for g the largest -log P_w,
// -log Q_w over the outputs in both supports) the lookups multiply linear masses instead of
// exponentiating log masses: no exp in the search's inner loop. Elsewhere (rare outputs, large
// k) every term is exponentiated from its log, as in the reference: Q-masses of e^-6000 beside
// e^eps of e^5999 are not lost.
//
// Outputs per mechanism: eps, the index (into the pairs attribute) of the pair attaining it,
// and the final bracket [lo, hi] of that pair's search (the JVP's segment). NaN in, NaN out.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <vector>

#include "pair_twins.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kMargin = 1e-9;  // relative and absolute slack on the Renyi bound
constexpr double kGuess = 0.92;   // the first point tried, a fraction of the way to the ceiling
constexpr int kSteps = 64;
constexpr int64_t kTwinDoubles = 1 << 21;  // 16 MB of pairs' canonical forms at most
constexpr double kSafe = 700.0;   // (2k + 2) g below this: every factor a normal double

double logaddexp(double a, double b) {
  if (a == -kInf) return b;
  if (b == -kInf) return a;
  const double top = std::max(a, b);
  return top + std::log1p(std::exp(-std::abs(a - b)));
}

// The outer count vectors of `slots` slots summing to k, their log multinomials.
struct Outer {
  int k = 0, slots = 0, size = 0;
  std::vector<int> counts;  // size x slots
  std::vector<double> log_mult, mult;  // multinomials, logged and (where all < e^700) linear
  bool linear = true;

  Outer(int k_, int slots_) : k(k_), slots(slots_) {
    std::vector<int> c(slots, 0);
    std::vector<double> lg(k + 1);
    for (int j = 0; j <= k; ++j) lg[j] = std::lgamma(j + 1.0);
    enumerate(c, 0, k, lg);
    size = static_cast<int>(log_mult.size());
    for (double l : log_mult) linear = linear && l <= kSafe;
    if (linear)
      for (double l : log_mult) mult.push_back(std::exp(l));
  }

  void enumerate(std::vector<int>& c, int slot, int left, const std::vector<double>& lg) {
    if (slot == slots - 1) {
      c[slot] = left;
      double mult = lg[k];
      for (int s = 0; s < slots; ++s) mult -= lg[c[s]];
      counts.insert(counts.end(), c.begin(), c.end());
      log_mult.push_back(mult);
      return;
    }
    for (int j = 0; j <= left; ++j) {
      c[slot] = j;
      enumerate(c, slot + 1, left - j, lg);
    }
  }
};

// One pair's k-fold loss as outer vectors and tail tables (linear or log, per `linear`).
struct Pair {
  const Outer* outer = nullptr;
  int k = 0, width = 0;  // width = k + 2: a table row
  bool linear = false;
  double step = 0.0, infinite = 0.0, top = -kInf;
  std::vector<double> base, mass_p, mass_q;  // per outer vector: linear masses, or logs
  std::vector<int> rest;
  std::vector<char> live;
  // (k + 1) x (k + 2) x 2: T_r(t) of P's then Q's binomial (linear, or log T_r(t)), side by
  // side: one lookup, one cache line for both
  std::vector<double> tails_pq;
  std::vector<double> scaled;          // scratch for one side's U table
  std::vector<double> L, lpl, lql, op, oq, oL;  // scratch per output / slot
  std::vector<double> power_p, power_q;  // slots x (k + 1): P_s^c, Q_s^c (linear mode)
  std::vector<char> both;

  explicit Pair(const Outer& o)
      : outer(&o), k(o.k), width(o.k + 2), base(o.size), mass_p(o.size), mass_q(o.size),
        rest(o.size), live(o.size), tails_pq(2 * (o.k + 1) * (o.k + 2)),
        scaled((o.k + 1) * (o.k + 2)), L(o.slots + 1), lpl(o.slots + 1), lql(o.slots + 1),
        op(o.slots), oq(o.slots), oL(o.slots), both(o.slots + 1),
        power_p(o.slots * (o.k + 1)), power_q(o.slots * (o.k + 1)) {}

  // T_r(t) for t = 0 .. k + 1 of Binom(r, pi), pi = a / (a + b) (from logs), into
  // table[2 (r width + t)].
  void tails(double log_a, double log_b, double* table) {
    const double total = logaddexp(log_a, log_b);
    const bool some = total > -kInf;
    const double log_pi = some ? log_a - total : 0.0;
    const double rho = some ? std::exp(log_b - total) : 0.0;
    double* U = scaled.data();
    std::fill(U, U + width, 0.0);
    U[0] = 1.0;
    for (int r = 1; r <= k; ++r) {
      const double* prev = U + (r - 1) * width;
      double* row = U + r * width;
      row[0] = 1.0;
      for (int t = 1; t < width; ++t) row[t] = prev[t - 1] + rho * prev[t];
    }
    for (int t = 0; t < width; ++t) {
      const double power = t > 0 ? t * log_pi : 0.0;  // no 0 * (-inf) at t = 0
      if (linear) {
        const double scale = std::exp(power);
        for (int r = 0; r <= k; ++r) table[2 * (r * width + t)] = scale * U[r * width + t];
      } else {
        for (int r = 0; r <= k; ++r) {
          const double u = U[r * width + t];
          table[2 * (r * width + t)] = u > 0 ? power + std::log(u) : -kInf;
        }
      }
    }
  }

  void build(const double* lp, const double* lq, int m) {
    double p_inf = 0.0, g = 0.0;
    for (int w = 0; w < m; ++w) {
      both[w] = lp[w] > -kInf && lq[w] > -kInf;
      const bool only_p = lp[w] > -kInf && lq[w] == -kInf;
      L[w] = both[w] ? lp[w] - lq[w] : 0.0;
      if (only_p) p_inf += std::exp(lp[w]);
      lpl[w] = both[w] ? lp[w] : -kInf;
      lql[w] = both[w] ? lq[w] : -kInf;
      if (both[w]) g = std::max(g, std::max(-lp[w], -lq[w]));
    }
    infinite = -std::expm1(k * std::log1p(-std::min(p_inf, 1.0)));
    linear = outer->linear && (2.0 * k + 2.0) * g <= kSafe;
    // inner outputs a, b: the larger loss first; one outside the supports takes the other's
    double la = L[m - 2], lb = L[m - 1];
    la = both[m - 2] ? la : lb;
    lb = both[m - 1] ? lb : L[m - 2];
    const bool swap = lb > la;
    if (swap) std::swap(la, lb);
    const double pa = swap ? lpl[m - 1] : lpl[m - 2], pb = swap ? lpl[m - 2] : lpl[m - 1];
    const double qa = swap ? lql[m - 1] : lql[m - 2], qb = swap ? lql[m - 2] : lql[m - 1];
    tails(pa, pb, tails_pq.data());
    tails(qa, qb, tails_pq.data() + 1);
    step = la - lb;
    const int slots = outer->slots;
    for (int s = 0; s < slots - 1; ++s) {
      op[s] = lpl[s];
      oq[s] = lql[s];
      oL[s] = L[s];
    }
    op[slots - 1] = logaddexp(pa, pb);
    oq[slots - 1] = logaddexp(qa, qb);
    oL[slots - 1] = lb;
    top = -kInf;
    if (linear) {  // masses as multinomial x powers: no exp per outer vector
      for (int s = 0; s < slots; ++s)
        for (int c = 0; c <= k; ++c) {
          power_p[s * (k + 1) + c] = c == 0 ? 1.0 : std::exp(c * op[s]);
          power_q[s * (k + 1) + c] = c == 0 ? 1.0 : std::exp(c * oq[s]);
        }
    }
    for (int v = 0; v < outer->size; ++v) {
      const int* c = outer->counts.data() + v * slots;
      double sp = outer->log_mult[v], sq = sp, b = 0.0;
      bool off = false;
      for (int s = 0; s < slots; ++s) {
        b += c[s] * oL[s];
        off = off || (c[s] > 0 && op[s] == -kInf);
      }
      base[v] = b;
      rest[v] = c[slots - 1];
      live[v] = !off;
      if (!off) top = std::max(top, b + rest[v] * step);
      if (linear) {
        double mp = outer->mult[v], mq = mp;
        for (int s = 0; s < slots; ++s) {
          mp *= power_p[s * (k + 1) + c[s]];
          mq *= power_q[s * (k + 1) + c[s]];
        }
        mass_p[v] = off ? 0.0 : mp;
        mass_q[v] = off ? 0.0 : mq;
      } else {
        for (int s = 0; s < slots; ++s)
          if (c[s] > 0) {
            sp += c[s] * op[s];
            sq += c[s] * oq[s];
          }
        mass_p[v] = off ? -kInf : sp;
        mass_q[v] = off ? -kInf : sq;
      }
    }
  }

  // The least j in [0, r + 1] with base + j step > eps (r + 1: none), as the reference decides.
  static int first_above(double base, int rest, double step, double eps) {
    const double r = rest;
    if (!(step > 0)) return base > eps ? 0 : rest + 1;
    const double ratio = (eps - base) / step;
    double guess = std::floor(std::min(std::max(ratio, -1.0), r + 1.0)) + 1.0;
    if (guess > 0 && base + (guess - 1.0) * step > eps) guess -= 1.0;
    if (base + guess * step <= eps) guess += 1.0;
    return static_cast<int>(std::min(std::max(guess, 0.0), r + 1.0));
  }

  // (A, e^eps B, n) at eps: P-mass above eps (the +inf atom's included), e^eps times the
  // Q-mass above eps, the live atoms above eps.
  void sums(double eps, double* A, double* eB, int64_t* n) const {
    if (linear) sums_of<true>(eps, A, eB, n);
    else sums_of<false>(eps, A, eB, n);
  }

  template <bool Linear>
  void sums_of(double eps, double* A, double* eB, int64_t* n) const {
    double a[2] = {0.0, 0.0}, b[2] = {0.0, 0.0};  // two chains: the adds overlap
    int64_t count = 0;
    const int size = outer->size;
    const double* bs = base.data();
    const int* rs = rest.data();
    const double* mp = mass_p.data();
    const double* mq = mass_q.data();
    const double* pq = tails_pq.data();
    const char* lv = live.data();
    for (int v = 0; v < size; ++v) {
      const int j = first_above(bs[v], rs[v], step, eps);
      const int at = 2 * (rs[v] * width + j);
      if (Linear) {
        a[v & 1] += mp[v] * pq[at];
        b[v & 1] += mq[v] * pq[at + 1];
      } else {
        a[v & 1] += std::exp(mp[v] + pq[at]);
        b[v & 1] += std::exp(eps + mq[v] + pq[at + 1]);
      }
      count += lv[v] ? rs[v] + 1 - j : 0;
    }
    *A = infinite + (a[0] + a[1]);
    *eB = Linear ? std::exp(eps) * (b[0] + b[1]) : b[0] + b[1];
    *n = count;
  }
};

double newton(double lo, double A, double eB, double delta) {
  if (A > delta && eB > 0) return lo + (std::log(A - delta) - std::log(eB));
  return A > delta ? kInf : lo;
}

struct Found {
  double lo, hi, eps;
  bool below, infinite;
};

Found search(const Pair& f, double delta, double floor, double bound) {
  const double top = std::max(f.top, floor);
  const double capped = bound * (1.0 + kMargin) + kMargin;
  const bool bounded = capped < top;
  double lo = floor, hi = bounded ? std::max(capped, floor) : top;
  int64_t n_hi = bounded ? -1 : 0;
  double A, eB;
  int64_t n_lo;
  f.sums(floor, &A, &eB, &n_lo);
  const bool below = !(A - delta > eB);
  const bool infinite = f.infinite > delta;
  bool done = n_lo == n_hi || below || infinite, use_newton = false;
  for (int count = 0; count < kSteps && !done; ++count) {
    const double x_n = std::min(newton(lo, A, eB, delta), hi);
    const double mid = count == 0 ? lo + kGuess * (hi - lo) : 0.5 * (lo + hi);
    use_newton = use_newton || x_n >= mid;
    const double x = use_newton ? x_n : mid;
    double A_x, eB_x;
    int64_t n_x;
    f.sums(x, &A_x, &eB_x, &n_x);
    const bool exact = x == x_n && n_x == n_lo;  // no atom crossed: lo's segment step is it
    const bool up = A_x - delta > eB_x && !exact;
    if (up) {
      lo = x;
      A = A_x;
      eB = eB_x;
      n_lo = n_x;
    }
    done = exact || x >= hi;
    if (!up && !exact) {
      hi = x;
      n_hi = n_x;
    }
    done = done || n_lo == n_hi;
  }
  double eps = newton(lo, A, eB, delta);
  eps = eps < lo ? lo : (eps > hi ? hi : eps);
  if (infinite) eps = kInf;
  else if (below) eps = floor;
  return {lo, hi, eps, below, infinite};
}

// The Renyi bound of one pair on the reference's grid of orders, alpha_i = 1 + 10^(-2 + 5i/47):
// min over i of k D_alpha(P||Q) + [log(1/delta) + (alpha-1) log(1-1/alpha) - log alpha]/(alpha-1)
// (Canonne, Kamath, Steinke 2020, arXiv:2004.00010, Prop. 12; +inf where Q = 0 < P somewhere).
// Every order gives an upper bound; the minimum is taken by a ternary search over the grid's
// index (14 orders of 48, the grid's minimum where the bound is unimodal over it, as it is on
// the mechanisms tried; elsewhere a weaker bound, which prunes less but changes no value).
struct Renyi {
  static constexpr int kOrders = 48;
  double alphas[kOrders], extra[kOrders], delta = -1.0;

  Renyi() {
    for (int i = 0; i < kOrders; ++i)
      alphas[i] = 1.0 + std::pow(10.0, -2.0 + 5.0 * i / (kOrders - 1));
  }

  void at_delta(double d) {
    if (d == delta) return;
    for (int i = 0; i < kOrders; ++i) {
      const double a = alphas[i];
      extra[i] = (std::log(1.0 / d) + (a - 1.0) * std::log1p(-1.0 / a) - std::log(a)) / (a - 1.0);
    }
    delta = d;
  }

  static double at(const double* lp, const double* lq, int m, int k, double a, double extra) {
    double top = -kInf;
    for (int w = 0; w < m; ++w)
      if (lp[w] > -kInf) top = std::max(top, a * lp[w] + (1.0 - a) * lq[w]);
    if (top == -kInf) return extra;
    double sum = 0.0;
    for (int w = 0; w < m; ++w)
      if (lp[w] > -kInf) sum += std::exp(a * lp[w] + (1.0 - a) * lq[w] - top);
    return k * (std::max(top + std::log(sum), 0.0) / (a - 1.0)) + extra;
  }

  static bool unbounded(const double* lp, const double* lq, int m) {
    for (int w = 0; w < m; ++w)
      if (lp[w] > -kInf && lq[w] == -kInf) return true;
    return false;
  }

  // The bound at the order alphas[i] alone (an upper bound too).
  double at_order(const double* lp, const double* lq, int m, int k, int i) const {
    return unbounded(lp, lq, m) ? kInf : at(lp, lq, m, k, alphas[i], extra[i]);
  }

  // The minimum over the grid by ternary search; `where`: the index it ends at.
  double bound(const double* lp, const double* lq, int m, int k, int* where) const {
    if (unbounded(lp, lq, m)) return kInf;
    double memo[kOrders];
    for (double& v : memo) v = std::numeric_limits<double>::quiet_NaN();
    auto f = [&](int i) {
      if (std::isnan(memo[i])) memo[i] = at(lp, lq, m, k, alphas[i], extra[i]);
      return memo[i];
    };
    int lo = 0, hi = kOrders - 1;
    while (hi - lo > 2) {
      const int m1 = lo + (hi - lo) / 3, m2 = hi - (hi - lo) / 3;
      if (f(m1) <= f(m2)) hi = m2;
      else lo = m1;
    }
    double best = kInf;
    for (int i = lo; i <= hi; ++i)
      if (f(i) < best) {
        best = f(i);
        *where = i;
      }
    return best;
  }
};

template <ffi::DataType T>
ffi::Error ComposedEps(ffi::Buffer<T> log_K, ffi::Buffer<T> delta, int64_t k,
                       ffi::Span<const int32_t> pairs, ffi::ResultBuffer<T> eps_out,
                       ffi::ResultBuffer<ffi::S32> which_out, ffi::ResultBuffer<T> lo_out,
                       ffi::ResultBuffer<T> hi_out) {
  using Native = ffi::NativeType<T>;
  const auto dims = log_K.dimensions();
  if (dims.size() < 2) return ffi::Error::InvalidArgument("log_K must have shape (..., n, m)");
  const int64_t n = dims[dims.size() - 2], m = dims[dims.size() - 1];
  const int64_t count = static_cast<int64_t>(delta.element_count());
  if (m < 2 || n < 1 || count * n * m != static_cast<int64_t>(log_K.element_count()))
    return ffi::Error::InvalidArgument("log_K (..., n, m >= 2) and delta (...) must match");
  if (k < 1 || k > 100000) return ffi::Error::InvalidArgument("k must be in [1, 100000]");
  const int64_t P = static_cast<int64_t>(pairs.size()) / 2;
  for (int64_t i = 0; i < 2 * P; ++i)
    if (pairs[i] < 0 || pairs[i] >= n) return ffi::Error::InvalidArgument("pair out of range");

  const Outer outer(static_cast<int>(k), static_cast<int>(m - 1));
  Pair pair(outer);
  // the pairs' canonical forms all at once (for their twins) where they take at most
  // kTwinDoubles doubles; else each pair's when it is needed, and no twins
  const bool twins = P * 2 * m <= kTwinDoubles;
  std::vector<double> K(n * m), bound(P), forms(twins ? P * 2 * m : 2 * m);
  std::vector<int> order(P), index(m);
  std::vector<uint64_t> hashes(twins ? P : 0);
  std::vector<int64_t> by_hash(twins ? P : 0), same(P);
  const Native* in = log_K.typed_data();
  const Native* d = delta.typed_data();
  Native* eps_o = eps_out->typed_data();
  int32_t* which_o = which_out->typed_data();
  Native* lo_o = lo_out->typed_data();
  Native* hi_o = hi_out->typed_data();
  Renyi renyi;
  int hint = Renyi::kOrders / 2;
  for (int64_t b = 0; b < count; ++b) {
    bool nan = std::isnan(static_cast<double>(d[b]));
    for (int64_t e = 0; e < n * m; ++e) {
      K[e] = static_cast<double>(in[b * n * m + e]);
      nan = nan || std::isnan(K[e]);
    }
    if (nan) {
      eps_o[b] = lo_o[b] = hi_o[b] = std::numeric_limits<Native>::quiet_NaN();
      which_o[b] = 0;
      continue;
    }
    const double dl = d[b];
    renyi.at_delta(dl);
    // each pair in canonical order; a pair equal to an earlier one is that one's twin: its
    // eps is the same, and the first of equal eps attains the max
    const int mm = static_cast<int>(m);
    const auto form = [&](int64_t i) {  // pair i's canonical log P (then log Q)
      double* at = forms.data() + (twins ? i * 2 * m : 0);
      if (!twins)
        jaxpriv_twins::canonical(K.data() + pairs[2 * i] * m, K.data() + pairs[2 * i + 1] * m,
                                 mm, index.data(), at, at + m);
      return at;
    };
    if (twins) {
      for (int64_t i = 0; i < P; ++i)
        jaxpriv_twins::canonical(K.data() + pairs[2 * i] * m, K.data() + pairs[2 * i + 1] * m,
                                 mm, index.data(), forms.data() + i * 2 * m,
                                 forms.data() + i * 2 * m + m);
      jaxpriv_twins::first_of_equal(forms.data(), P, mm, hashes.data(), by_hash.data(),
                                    same.data());
    } else {
      std::iota(same.begin(), same.end(), 0);
    }
    // each pair's Renyi bound at one order (`hint`: where the last mechanism's first bound
    // ended): a valid bound, cheap, and what the pairs are taken in decreasing order of
    for (int64_t i = 0; i < P; ++i) {
      const double* lp = same[i] != i ? nullptr : form(i);
      bound[i] = lp == nullptr ? -kInf
                               : renyi.at_order(lp, lp + m, mm, static_cast<int>(k), hint);
    }
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int x, int y) { return bound[x] > bound[y]; });
    double best = 0.0, lo = 0.0, hi = 0.0;
    int which = 0;
    bool first = true;
    for (int64_t r = 0; r < P; ++r) {
      const int i = order[r];
      if (same[i] != i) continue;  // its twin's eps is its own
      const double* lp = form(i);
      const double* lq = lp + m;
      if (!(bound[i] * (1.0 + kMargin) + kMargin > best)) continue;  // pruned at one order
      int at = hint;
      const double U = renyi.bound(lp, lq, static_cast<int>(m), static_cast<int>(k), &at);
      if (first) hint = at;
      first = false;
      if (!(U * (1.0 + kMargin) + kMargin > best)) continue;  // pruned over the grid
      pair.build(lp, lq, static_cast<int>(m));
      const Found found = search(pair, dl, best, U);
      if (!found.below && found.eps > best) {
        best = found.eps;
        which = i;
        lo = found.lo;
        hi = found.hi;
      }
    }
    eps_o[b] = static_cast<Native>(best);
    which_o[b] = which;
    lo_o[b] = static_cast<Native>(lo);
    hi_o[b] = static_cast<Native>(hi);
  }
  return ffi::Error::Success();
}

}  // namespace

#define JAXPRIV_COMPOSED_BINDING(T)                 \
  ffi::Ffi::Bind()                                  \
      .Arg<ffi::Buffer<T>>()                        \
      .Arg<ffi::Buffer<T>>()                        \
      .Attr<int64_t>("k")                           \
      .Attr<ffi::Span<const int32_t>>("pairs")      \
      .Ret<ffi::Buffer<T>>()                        \
      .Ret<ffi::Buffer<ffi::S32>>()                 \
      .Ret<ffi::Buffer<T>>()                        \
      .Ret<ffi::Buffer<T>>()

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxprivComposedEpsF32, ComposedEps<ffi::F32>,
                              JAXPRIV_COMPOSED_BINDING(ffi::F32));
XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxprivComposedEpsF64, ComposedEps<ffi::F64>,
                              JAXPRIV_COMPOSED_BINDING(ffi::F64));
