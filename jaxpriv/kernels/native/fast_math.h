// exp, expm1 and log1p without a branch or a library call, so that a loop of them vectorizes:
// zcdp_orders.cc evaluates D_alpha/alpha at several orders at once (the grid, the
// branch-and-bound splits), its Newton steps and a group's first pass with them (glibc's
// scalar expm1 and log1p were ~40% of a zCDP pair's time, one call at a time). All are accurate to a few units in the last place of a
// double: within 1e-15 relative of the C library's over their ranges, near 0 and at the
// reduction's seams (worst 2.7e-16 for expm1, 4.4e-16 for log1p;
// tests/test_native_pair_levels.py checks the three).
//
// exp and expm1: x = k ln2 + r, |r| <= ln2/2, expm1(r) by its Taylor polynomial to r^13
// (remainder below 1.3e-17 of expm1(r)), exp(x) = 2^k (1 + expm1(r)), expm1(x) = 2^k expm1(r) +
// (2^k - 1); x clamped to [-700, 700] (expm1(-700) = -1 in double precision; exp is 0 below).

#ifndef JAXPRIV_FAST_MATH_H_
#define JAXPRIV_FAST_MATH_H_

#include <cstdint>
#include <cstring>

namespace jaxpriv_fast {

// 2^k and expm1(r) of x = k ln2 + r, for x in [-700, 700].
struct Reduced {
  double scale, em1r;
};

inline Reduced reduce(double x) {
  constexpr double kLog2e = 1.4426950408889634;
  constexpr double kLn2Hi = 6.93147180369123816490e-01;
  constexpr double kLn2Lo = 1.90821492927058770002e-10;
  constexpr double kShift = 6755399441055744.0;  // 1.5 * 2^52: adding it rounds to an integer
  const double shifted = x * kLog2e + kShift;
  const double k = shifted - kShift;
  const double r = (x - k * kLn2Hi) - k * kLn2Lo;
  double p = 1.0 / 6227020800.0;  // 1/13!
  p = p * r + 1.0 / 479001600.0;
  p = p * r + 1.0 / 39916800.0;
  p = p * r + 1.0 / 3628800.0;
  p = p * r + 1.0 / 362880.0;
  p = p * r + 1.0 / 40320.0;
  p = p * r + 1.0 / 5040.0;
  p = p * r + 1.0 / 720.0;
  p = p * r + 1.0 / 120.0;
  p = p * r + 1.0 / 24.0;
  p = p * r + 1.0 / 6.0;
  p = p * r + 0.5;
  int64_t bits;
  std::memcpy(&bits, &shifted, sizeof bits);
  const int64_t k_int = static_cast<int64_t>(static_cast<uint64_t>(bits) << 13) >> 13;
  const int64_t scale_bits = static_cast<int64_t>(static_cast<uint64_t>(k_int + 1023) << 52);
  double scale;
  std::memcpy(&scale, &scale_bits, sizeof scale);
  return {scale, r + r * r * p};
}

inline double clamp700(double x) { return x < -700.0 ? -700.0 : (x > 700.0 ? 700.0 : x); }

// e^x (0 below -700, and at -inf) and e^x - 1, from one reduction: where both are wanted of
// one x, one polynomial (zcdp_orders.cc's first pass).
struct ExpExpm1 {
  double exp, expm1;
};

inline ExpExpm1 fast_exp_expm1(double x) {
  const Reduced e = reduce(clamp700(x));
  return {x < -700.0 ? 0.0 : e.scale + e.scale * e.em1r, e.scale * e.em1r + (e.scale - 1.0)};
}

inline double fast_expm1(double x) { return fast_exp_expm1(x).expm1; }

inline double fast_exp(double x) { return fast_exp_expm1(x).exp; }

// log1p(s) for finite s >= 0: y = 1 + s = 2^k m, m in [sqrt(1/2), sqrt(2)), log m = 2 atanh(f)
// with f = (m - 1)/(m + 1), |f| <= 0.1716, by its series to f^21 (remainder below 3e-17 of it),
// plus (s - (y - 1))/y for the rounding of 1 + s (as musl's log1p).
inline double fast_log1p(double s) {
  constexpr double kLn2Hi = 6.93147180369123816490e-01;
  constexpr double kLn2Lo = 1.90821492927058770002e-10;
  const double y = 1.0 + s;
  const double c = (s - (y - 1.0)) / y;
  uint64_t bits;
  std::memcpy(&bits, &y, sizeof bits);
  bits += static_cast<uint64_t>(0x3ff00000 - 0x3fe6a09e) << 32;
  const double k = static_cast<double>(static_cast<int64_t>(bits >> 52) - 0x3ff);
  bits = (bits & 0x000fffffffffffffULL) + (static_cast<uint64_t>(0x3fe6a09e) << 32);
  double m;
  std::memcpy(&m, &bits, sizeof m);
  const double f = (m - 1.0) / (m + 1.0);
  const double z = f * f;
  double p = 1.0 / 21.0;
  p = p * z + 1.0 / 19.0;
  p = p * z + 1.0 / 17.0;
  p = p * z + 1.0 / 15.0;
  p = p * z + 1.0 / 13.0;
  p = p * z + 1.0 / 11.0;
  p = p * z + 1.0 / 9.0;
  p = p * z + 1.0 / 7.0;
  p = p * z + 1.0 / 5.0;
  p = p * z + 1.0 / 3.0;
  const double log_m = 2.0 * f + 2.0 * f * z * p;
  return k * kLn2Hi + ((log_m + c) + k * kLn2Lo);
}

}  // namespace jaxpriv_fast

#endif  // JAXPRIV_FAST_MATH_H_
