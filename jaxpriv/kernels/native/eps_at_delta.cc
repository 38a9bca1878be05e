// The least eps >= 0 with delta(eps) <= delta of float32 pairs (P, Q): jaxpriv.kernels.pair_levels'
// float32 path of the eps_at_delta notion on the CPU (SPEC §5), as
// jaxpriv.core.pair_notions.eps_at_delta_pair computes it: delta(eps) = max_k (A_k - e^eps B_k)
// over the prefix sums A_k, B_k of P, Q with the outputs sorted by log(P/Q) descending, so
// eps = max(0, max over prefixes with A_k > delta of log((A_k - delta)/B_k)), +inf where such a
// prefix has B_k = 0.
//
// Why by hand: XLA:CPU sorts each pair's short axis of outputs with a general sort; here each
// pair is a scalar loop in double precision (an insertion sort of its m keys), ~0.1 us a pair.
// NaN in, NaN out.

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

struct Entry {
  double key, p, q;
};

float one_pair(const float* log_P, const float* log_Q, int m, double delta, Entry* entries) {
  if (std::isnan(delta)) return std::numeric_limits<float>::quiet_NaN();
  for (int i = 0; i < m; ++i) {
    const double lp = log_P[i], lq = log_Q[i];
    if (std::isnan(lp) || std::isnan(lq)) return std::numeric_limits<float>::quiet_NaN();
    const bool has_p = lp > -kInf, has_q = lq > -kInf;
    const double key = has_p && has_q ? lp - lq : (has_p ? kInf : -kInf);
    Entry e{key, has_p ? std::exp(lp) : 0.0, has_q ? std::exp(lq) : 0.0};
    int j = i;  // insertion sort, descending keys
    while (j > 0 && entries[j - 1].key < e.key) {
      entries[j] = entries[j - 1];
      --j;
    }
    entries[j] = e;
  }
  // the largest (A_k - delta)/B_k (at least 1: eps >= 0), one log at the end
  double A = 0.0, B = 0.0, best = 1.0;
  for (int k = 0; k < m; ++k) {
    A += entries[k].p;
    B += entries[k].q;
    if (A > delta) {
      if (!(B > 0.0)) return std::numeric_limits<float>::infinity();
      if (A - delta > best * B) best = (A - delta) / B;
    }
  }
  return static_cast<float>(std::log(best));
}

ffi::Error EpsAtDelta(ffi::Buffer<ffi::F32> log_P, ffi::Buffer<ffi::F32> log_Q,
                      ffi::Buffer<ffi::F32> delta, ffi::ResultBuffer<ffi::F32> eps) {
  const auto dims = log_P.dimensions();
  if (dims.size() < 1) return ffi::Error::InvalidArgument("log_P must have shape (..., m)");
  const int64_t m = dims[dims.size() - 1];
  if (m < 1) return ffi::Error::InvalidArgument("the pairs need m >= 1 outputs");
  const int64_t count = static_cast<int64_t>(log_P.element_count()) / m;
  if (log_Q.element_count() != log_P.element_count() ||
      static_cast<int64_t>(delta.element_count()) != count ||
      static_cast<int64_t>(eps->element_count()) != count)
    return ffi::Error::InvalidArgument("log_P, log_Q, delta and the result must match");
  std::vector<Entry> entries(m);
  const float* p = log_P.typed_data();
  const float* q = log_Q.typed_data();
  const float* d = delta.typed_data();
  float* out = eps->typed_data();
  for (int64_t i = 0; i < count; ++i)
    out[i] = one_pair(p + i * m, q + i * m, static_cast<int>(m), d[i], entries.data());
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(JaxprivEpsAtDelta, EpsAtDelta,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>());
