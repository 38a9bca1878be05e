// Pairs of rows equal up to a permutation of the outputs ("twins": every pair of a randomized
// response), for the kernels that take a mechanism's max over its ordered pairs of rows
// (zcdp_orders.cc, composed_eps.cc): each pair's outputs are put in a canonical order, so that
// every sum over them is a function of the pair's multiset of (P_w, Q_w) and twins get the same
// bits; then a pair equal in those bits to an earlier one is solved once.

#ifndef JAXPRIV_PAIR_TWINS_H_
#define JAXPRIV_PAIR_TWINS_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace jaxpriv_twins {

// The canonical order of a pair's m outputs, by log P and then log Q: index[k], the output at
// place k (`index`: m ints). A pair with a NaN keeps its order (its level is NaN).
template <typename T>
void canonical_order_by_compares(const T* log_P, const T* log_Q, int m, int* index) {
  bool nan = false;
  for (int i = 0; i < m; ++i) nan |= std::isnan(log_P[i]) || std::isnan(log_Q[i]);
  for (int i = 0; i < m; ++i) index[i] = i;
  if (nan) return;
  const auto before = [&](int a, int b) {
    return log_P[a] < log_P[b] || (log_P[a] == log_P[b] && log_Q[a] < log_Q[b]);
  };
  if (m > 32) {
    std::sort(index, index + m, before);
  } else {  // insertion sort: m is small
    for (int i = 1; i < m; ++i)
      for (int j = i; j > 0 && before(index[j], index[j - 1]); --j)
        std::swap(index[j], index[j - 1]);
  }
}

// The outputs at `index` (a pair's canonical order) into out_P, out_Q.
template <typename T>
void gather_outputs(const T* log_P, const T* log_Q, int m, const int* index, T* out_P,
                    T* out_Q) {
  for (int i = 0; i < m; ++i) {
    out_P[i] = log_P[index[i]];
    out_Q[i] = log_Q[index[i]];
  }
}

// A pair's m outputs in canonical order into out_P, out_Q (`index`: m ints of scratch).
template <typename T>
void canonical(const T* log_P, const T* log_Q, int m, int* index, T* out_P, T* out_Q) {
  canonical_order_by_compares(log_P, log_Q, m, index);
  gather_outputs(log_P, log_Q, m, index, out_P, out_Q);
}

// float pairs (zcdp_orders.cc): the same order by integer keys, faster than the comparisons of
// the template (a quarter of the grouped zCDP kernel's time was here): each output's key is its
// log P's bits, mapped so that integer order is the floats' order (-0 before +0), above its
// log Q's, and the keys are sorted as integers. Equal multisets of (log P, log Q) bits give the
// same bits, as the template's order does. The order itself (canonical_order) lets the zCDP
// kernel read a pair's per-output terms, computed once by its first pass, in canonical order.
inline uint32_t ordered_bits(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits ^ ((bits >> 31) ? 0xFFFFFFFFu : 0x80000000u);
}

// The canonical order of a float pair's m outputs: order[k], the output at place k (the
// template's order where a value is NaN or m > 64).
inline void canonical_order(const float* log_P, const float* log_Q, int m, int* order) {
  bool nan = false;
  for (int i = 0; i < m; ++i) nan |= std::isnan(log_P[i]) || std::isnan(log_Q[i]);
  if (nan || m > 64) return canonical_order_by_compares(log_P, log_Q, m, order);
  for (int i = 0; i < m; ++i) order[i] = i;
  uint64_t keys[64];
  for (int i = 0; i < m; ++i)
    keys[i] = (static_cast<uint64_t>(ordered_bits(log_P[i])) << 32) | ordered_bits(log_Q[i]);
  for (int i = 1; i < m; ++i) {
    const uint64_t key = keys[i];
    const int at = order[i];
    int j = i;
    for (; j > 0 && keys[j - 1] > key; --j) keys[j] = keys[j - 1], order[j] = order[j - 1];
    keys[j] = key;
    order[j] = at;
  }
}

inline void canonical(const float* log_P, const float* log_Q, int m, int* index, float* out_P,
                      float* out_Q) {
  canonical_order(log_P, log_Q, m, index);
  gather_outputs(log_P, log_Q, m, index, out_P, out_Q);
}

// same[i]: the first of `count` pairs (2m values each, consecutive in `forms`) with pair i's
// bits (i itself where none before it has them); `hashes` and `by_hash`: scratch of `count`.
template <typename T>
void first_of_equal(const T* forms, int64_t count, int m, uint64_t* hashes, int64_t* by_hash,
                    int64_t* same) {
  const int64_t width = 2 * static_cast<int64_t>(m);
  for (int64_t i = 0; i < count; ++i) {
    uint64_t h = 1469598103934665603ULL;  // FNV-1a over the values' bytes
    const unsigned char* bytes = reinterpret_cast<const unsigned char*>(forms + i * width);
    for (size_t k = 0; k < width * sizeof(T); ++k) h = (h ^ bytes[k]) * 1099511628211ULL;
    hashes[i] = h;
    by_hash[i] = i;
  }
  std::sort(by_hash, by_hash + count, [&](int64_t a, int64_t b) {
    return hashes[a] < hashes[b] || (hashes[a] == hashes[b] && a < b);
  });
  for (int64_t k = 0; k < count; ++k) {
    const int64_t i = by_hash[k];
    same[i] = i;
    for (int64_t j = k - 1; j >= 0 && hashes[by_hash[j]] == hashes[i]; --j) {
      const int64_t r = by_hash[j];  // equal hashes are held in index order: r < i
      if (same[r] == r && std::memcmp(forms + r * width, forms + i * width,
                                      width * sizeof(T)) == 0) {
        same[i] = r;
        break;
      }
    }
  }
}

}  // namespace jaxpriv_twins

#endif  // JAXPRIV_PAIR_TWINS_H_
