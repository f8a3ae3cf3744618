// The GRU recurrence over a whole sequence, forward and backward, as MindSpore AOT custom operators (CPU).
//
// The readable reference is marl/modules/gru_bptt.py (GRUSequence and its hand-written bprop); this file
// computes exactly the same quantities, in float32, in three kernels instead of one MindSpore kernel per
// step and operation. Gate order and layout follow torch.nn.GRUCell (r, z, n):
//   g_t  = h_{t-1} W_hh^T                          (M, 3H)
//   r, z = sigmoid(gi_rz_t + g_t[:, :2H])          (b_hr, b_hz folded into gi_rz by the caller)
//   hn_t = g_t[:, 2H:] + b_hn
//   n_t  = tanh(gi_n_t + r * hn_t)
//   h_t  = n_t + z * (h_{t-1} - n_t)
// Tensors are row-major float32: gi_rz (T, M, 2H), gi_n (T, M, H), h0 (M, H), w_hh (3H, H), b_hn (H).
// "saved" (T, M, 4H) holds [r | z | n | hn] per row for the backward pass.
//
// Every kernel has MindSpore's AOT signature:
//   int f(int nparam, void** params, int* ndims, int64_t** shapes, const char** dtypes, void* stream,
//         void* extra)
// with the inputs first and then the outputs in params; it returns 0 on success.
//
// The matrix products use one register-blocked micro-kernel (6 rows x 16 columns, written with GCC
// vector extensions, which compile to AVX2/FMA with -march=native) that needs the column count to be a
// multiple of 16; other sizes use a plain loop. exp/sigmoid/tanh are written out (no libm call) so the
// loops vectorise (tests hold them to a float64 reference).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

typedef float v8 __attribute__((vector_size(32)));
typedef float v8u __attribute__((vector_size(32), aligned(4), may_alias));  // unaligned access to floats

inline v8 load8(const float* p) { return *reinterpret_cast<const v8u*>(p); }
inline void store8(float* p, v8 v) { *reinterpret_cast<v8u*>(p) = v; }

// C[R x 16] (+)= A[R x K] * B[K x 16]; A(r, k) = A[r * ars + k * aks]; B and C row-major with ld.
template <int R>
void micro(const float* a, int64_t ars, int64_t aks, const float* b, int64_t ldb, float* c, int64_t ldc,
           int64_t k_len, bool accumulate) {
  v8 acc0[R], acc1[R];
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) {
    if (accumulate) {
      acc0[r] = load8(c + r * ldc);
      acc1[r] = load8(c + r * ldc + 8);
    } else {
      acc0[r] = v8{};
      acc1[r] = v8{};
    }
  }
  for (int64_t k = 0; k < k_len; ++k) {
    const v8 b0 = load8(b + k * ldb), b1 = load8(b + k * ldb + 8);
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      const float s = a[r * ars + k * aks];
      acc0[r] += s * b0;
      acc1[r] += s * b1;
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) {
    store8(c + r * ldc, acc0[r]);
    store8(c + r * ldc + 8, acc1[r]);
  }
}

// C[M x N] (+)= A[M x K] B[K x N] with A(r, k) = a[r * ars + k * aks], B and C row-major.
void gemm(int64_t m, int64_t n, int64_t k, const float* a, int64_t ars, int64_t aks, const float* b,
          int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  if (n % 16 != 0) {  // plain loop (sizes the blocked kernel does not cover)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        float s = accumulate ? c[i * ldc + j] : 0.0f;
        for (int64_t q = 0; q < k; ++q) s += a[i * ars + q * aks] * b[q * ldb + j];
        c[i * ldc + j] = s;
      }
    return;
  }
  // K in chunks, so that the chunk of B and of A stays in cache while every block of C passes over it
  constexpr int64_t kc = 256;
  for (int64_t k0 = 0; k0 < k; k0 += kc) {
    const int64_t kl = k - k0 < kc ? k - k0 : kc;
    const bool acc = accumulate || k0 > 0;
    const float* ak = a + k0 * aks;
    const float* bk = b + k0 * ldb;
    for (int64_t j = 0; j < n; j += 16) {
      int64_t i = 0;
      for (; i + 6 <= m; i += 6) micro<6>(ak + i * ars, ars, aks, bk + j, ldb, c + i * ldc + j, ldc, kl, acc);
      const float* ai = ak + i * ars;
      float* ci = c + i * ldc + j;
      switch (m - i) {
        case 5: micro<5>(ai, ars, aks, bk + j, ldb, ci, ldc, kl, acc); break;
        case 4: micro<4>(ai, ars, aks, bk + j, ldb, ci, ldc, kl, acc); break;
        case 3: micro<3>(ai, ars, aks, bk + j, ldb, ci, ldc, kl, acc); break;
        case 2: micro<2>(ai, ars, aks, bk + j, ldb, ci, ldc, kl, acc); break;
        case 1: micro<1>(ai, ars, aks, bk + j, ldb, ci, ldc, kl, acc); break;
        default: break;
      }
    }
  }
}

// Loads and stores of one value (float) or eight (v8), so that the element-wise code below is written once.
typedef int32_t v8i __attribute__((vector_size(32)));
template <class V> inline V ld(const float* p);
template <> inline float ld<float>(const float* p) { return *p; }
template <> inline v8 ld<v8>(const float* p) { return load8(p); }
inline void st(float* p, float v) { *p = v; }
inline void st(float* p, v8 v) { store8(p, v); }
inline float as_float(int32_t bits) { return __builtin_bit_cast(float, bits); }
inline v8 as_float(v8i bits) { return __builtin_bit_cast(v8, bits); }
inline int32_t to_int(float x) { return static_cast<int32_t>(x); }
inline v8i to_int(v8 x) { return __builtin_convertvector(x, v8i); }

// exp for float32 (Cephes' range reduction by ln 2 and degree-6 polynomial), inputs clamped to [-87, 88];
// the rounding uses the 1.5 * 2^23 trick, plain arithmetic that vectorises (no libm call).
template <class V>
inline V fast_exp(V x) {
  x = x < -87.0f ? V{} - 87.0f : x;
  x = x > 88.0f ? V{} + 88.0f : x;
  const V n = (x * 1.44269504f + 12582912.0f) - 12582912.0f;
  const V r = (x - n * 0.693359375f) + n * 2.12194440e-4f;
  V p = V{} + 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  return p * as_float((to_int(n) + 127) << 23);
}
template <class V>
inline V sigmoid(V x) {
  return 1.0f / (1.0f + fast_exp(-x));
}
// tanh as Cephes' tanhf computes it: an odd polynomial for |x| < 0.625 (no cancellation near 0), else
// sign(x) (1 - 2 / (exp(2|x|) + 1)), accurate near saturation where 1 - tanh^2 is small.
template <class V>
inline V tanh_(V x) {
  const V ax = x < 0.0f ? -x : x;
  const V big = 1.0f - 2.0f / (fast_exp(2.0f * ax) + 1.0f);
  const V z = x * x;
  V p = V{} - 5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const V small = p * z * x + x;
  return ax > 0.625f ? (x < 0.0f ? -big : big) : small;
}

// Columns q.. q+width of one row of a forward step (width 8 with V = v8, 1 with V = float).
template <class V>
inline void fwd_cols(int64_t q, int64_t hd, const float* grz, const float* gn, const float* g, const float* b_n,
                     const float* hp, float* ht, float* sv) {
  const V r = sigmoid<V>(ld<V>(grz + q) + ld<V>(g + q));
  const V z = sigmoid<V>(ld<V>(grz + hd + q) + ld<V>(g + hd + q));
  const V hn = ld<V>(g + 2 * hd + q) + ld<V>(b_n + q);
  const V n = tanh_<V>(ld<V>(gn + q) + r * hn);
  st(ht + q, n + z * (ld<V>(hp + q) - n));
  if (sv) {
    st(sv + q, r);
    st(sv + hd + q, z);
    st(sv + 2 * hd + q, n);
    st(sv + 3 * hd + q, hn);
  }
}

// Columns q.. of one row of a backward step: gate gradients, and the direct part of d h_{t-1} into cr.
template <class V>
inline void bwd_cols(int64_t q, int64_t hd, const float* sv, const float* hp, const float* dho, float* cr,
                     float* dg, float* drz, float* dn) {
  const V r = ld<V>(sv + q), z = ld<V>(sv + hd + q), n = ld<V>(sv + 2 * hd + q), hn = ld<V>(sv + 3 * hd + q);
  const V dh = ld<V>(dho + q) + ld<V>(cr + q);
  const V d_npre = dh * (1.0f - z) * (1.0f - n * n);  // d of the pre-activation gi_n + r * hn
  const V d_r = d_npre * hn * r * (1.0f - r);
  const V d_z = dh * (ld<V>(hp + q) - n) * z * (1.0f - z);
  st(dg + q, d_r);
  st(dg + hd + q, d_z);
  st(dg + 2 * hd + q, d_npre * r);
  st(drz + q, d_r);
  st(drz + hd + q, d_z);
  st(dn + q, d_npre);
  st(cr + q, dh * z);  // the direct path h_{t-1} -> h_t; the matrix path is added by the caller
}

struct Dims {
  int64_t t, m, h;
};

// Kernel threads: MARL_KERNEL_THREADS (marl.utils.ms.setup sets it to the MindSpore thread count).
int n_threads() {
  const char* s = std::getenv("MARL_KERNEL_THREADS");
  const int n = s ? std::atoi(s) : 1;
  return n < 1 ? 1 : (n > 64 ? 64 : n);
}

// body(lo, hi) over [0, n) in chunks that are multiples of `align`, one chunk per kernel thread (the caller
// runs the first). Rows of the recurrence are independent, so the chunks need no synchronisation; small
// problems (under `min_work` units of work in all) stay on one thread, where starting one would cost more.
template <class F>
void parallel_chunks(int64_t n, int64_t align, int64_t work, F body) {
  constexpr int64_t min_work = 1 << 18;
  const int64_t nt = work < min_work ? 1 : n_threads();
  const int64_t per = ((n + nt - 1) / nt + align - 1) / align * align;
  std::vector<std::thread> pool;
  for (int64_t lo = per; lo < n; lo += per) pool.emplace_back(body, lo, std::min(n, lo + per));
  body(int64_t{0}, std::min(n, per));
  for (auto& th : pool) th.join();
}

// Forward over all steps; writes h (T, M, H) and, when saved != nullptr, [r | z | n | hn] (T, M, 4H).
void forward(const Dims& d, const float* gi_rz, const float* gi_n, const float* h0, const float* w_hh,
             const float* b_n, float* h_out, float* saved) {
  const int64_t t_len = d.t, m = d.m, hd = d.h, g3 = 3 * hd;
  thread_local std::vector<float> wt;
  wt.resize(hd * g3);
  for (int64_t j = 0; j < g3; ++j)  // W_hh^T (H, 3H), so each step is one row-major product
    for (int64_t q = 0; q < hd; ++q) wt[q * g3 + j] = w_hh[j * hd + q];
  const float* w = wt.data();
  parallel_chunks(m, 6, t_len * m * hd * g3, [=](int64_t r0, int64_t r1) {
    std::vector<float> g((r1 - r0) * g3);
    const float* hprev = h0 + r0 * hd;
    for (int64_t t = 0; t < t_len; ++t) {
      gemm(r1 - r0, g3, hd, hprev, hd, 1, w, g3, g.data(), g3, false);
      float* ht = h_out + (t * m + r0) * hd;
      for (int64_t i = r0; i < r1; ++i) {
        const float* gi = g.data() + (i - r0) * g3;
        const float* grz = gi_rz + (t * m + i) * 2 * hd;
        const float* gn = gi_n + (t * m + i) * hd;
        const float* hp = hprev + (i - r0) * hd;
        float* ho = ht + (i - r0) * hd;
        float* sv = saved ? saved + (t * m + i) * 4 * hd : nullptr;
        int64_t q = 0;
        for (; q + 8 <= hd; q += 8) fwd_cols<v8>(q, hd, grz, gn, gi, b_n, hp, ho, sv);
        for (; q < hd; ++q) fwd_cols<float>(q, hd, grz, gn, gi, b_n, hp, ho, sv);
      }
      hprev = ht;
    }
  });
}

// Backward: from dL/dh (T, M, H) to dL/d(gi_rz, gi_n, h0, W_hh, b_hn).
void backward(const Dims& d, const float* dh_out, const float* h, const float* saved, const float* h0,
              const float* w_hh, float* d_gi_rz, float* d_gi_n, float* d_h0, float* d_w, float* d_b) {
  const int64_t t_len = d.t, m = d.m, hd = d.h, g3 = 3 * hd;
  thread_local std::vector<float> dg_buf;
  dg_buf.resize(t_len * m * g3);  // d of [W_hr h, W_hz h, W_hn h + b_hn] for every step
  float* dg_all = dg_buf.data();
  std::memset(d_h0, 0, sizeof(float) * m * hd);  // the carried dL/dh_{t-1}, which ends as dL/dh0
  parallel_chunks(m, 6, t_len * m * hd * g3, [=](int64_t r0, int64_t r1) {
    for (int64_t t = t_len - 1; t >= 0; --t) {
      const float* hprev = t > 0 ? h + (t - 1) * m * hd : h0;
      float* dg = dg_all + t * m * g3;
      for (int64_t i = r0; i < r1; ++i) {
        const float* sv = saved + (t * m + i) * 4 * hd;
        const float* dho = dh_out + (t * m + i) * hd;
        float* drz = d_gi_rz + (t * m + i) * 2 * hd;
        float* dn = d_gi_n + (t * m + i) * hd;
        int64_t q = 0;
        for (; q + 8 <= hd; q += 8) bwd_cols<v8>(q, hd, sv, hprev + i * hd, dho, d_h0 + i * hd, dg + i * g3, drz, dn);
        for (; q < hd; ++q) bwd_cols<float>(q, hd, sv, hprev + i * hd, dho, d_h0 + i * hd, dg + i * g3, drz, dn);
      }
      gemm(r1 - r0, hd, g3, dg + r0 * g3, g3, 1, w_hh, hd, d_h0 + r0 * hd, hd, true);
    }
  });
  // d W_hh = sum_t dg_t^T h_{t-1}: the t = 0 block against h0, then the others against h[0..T-2]; split by
  // rows of d W_hh (columns of dg)
  parallel_chunks(g3, 16, t_len * m * hd * g3, [=](int64_t j0, int64_t j1) {
    gemm(j1 - j0, hd, m, dg_all + j0, 1, g3, h0, hd, d_w + j0 * hd, hd, false);
    if (t_len > 1) gemm(j1 - j0, hd, (t_len - 1) * m, dg_all + m * g3 + j0, 1, g3, h, hd, d_w + j0 * hd, hd, true);
  });
  for (int64_t q = 0; q < hd; ++q) d_b[q] = 0.0f;
  for (int64_t row = 0; row < t_len * m; ++row)
    for (int64_t q = 0; q < hd; ++q) d_b[q] += dg_all[row * g3 + 2 * hd + q];
}

bool all_float32(int nparam, const char** dtypes) {
  for (int i = 0; i < nparam; ++i)
    if (std::strcmp(dtypes[i], "float32") != 0) return false;
  return true;
}

Dims dims_of(int64_t** shapes, int h_index) { return Dims{shapes[0][0], shapes[0][1], shapes[h_index][1]}; }

}  // namespace

extern "C" {

// inputs gi_rz, gi_n, h0, w_hh, b_hn; output h (T, M, H).
int GruSeqForward(int nparam, void** params, int* ndims, int64_t** shapes, const char** dtypes, void* stream,
                  void* extra) {
  (void)ndims, (void)stream, (void)extra;
  if (nparam != 6 || !all_float32(nparam, dtypes)) return 1;
  float** p = reinterpret_cast<float**>(params);
  forward(dims_of(shapes, 2), p[0], p[1], p[2], p[3], p[4], p[5], nullptr);
  return 0;
}

// inputs gi_rz, gi_n, h0, w_hh, b_hn; outputs h (T, M, H), saved (T, M, 4H).
int GruSeqForwardSave(int nparam, void** params, int* ndims, int64_t** shapes, const char** dtypes,
                      void* stream, void* extra) {
  (void)ndims, (void)stream, (void)extra;
  if (nparam != 7 || !all_float32(nparam, dtypes)) return 1;
  float** p = reinterpret_cast<float**>(params);
  forward(dims_of(shapes, 2), p[0], p[1], p[2], p[3], p[4], p[5], p[6]);
  return 0;
}

// inputs dh (T, M, H), h (T, M, H), saved (T, M, 4H), h0 (M, H), w_hh (3H, H);
// outputs d_gi_rz (T, M, 2H), d_gi_n (T, M, H), d_h0 (M, H), d_w_hh (3H, H), d_b_hn (H).
int GruSeqBackward(int nparam, void** params, int* ndims, int64_t** shapes, const char** dtypes, void* stream,
                   void* extra) {
  (void)ndims, (void)stream, (void)extra;
  if (nparam != 10 || !all_float32(nparam, dtypes)) return 1;
  float** p = reinterpret_cast<float**>(params);
  backward(dims_of(shapes, 3), p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9]);
  return 0;
}

}  // extern "C"
