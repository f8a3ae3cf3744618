// The GRU recurrence over a whole sequence, forward and backward, as MindSpore AOT custom operators (CPU).
//
// The readable reference is marl/modules/gru_bptt.py (GRUSequence and its hand-written bprop, wrapped with
// the bias additions by marl/modules/gru_kernel.py's GRUSequenceReference); this file computes exactly the
// same quantities, in float32, in three kernels instead of one MindSpore kernel per step and operation. Gate
// order and layout follow torch.nn.GRUCell (r, z, n), with gi = x W_ih^T (no bias) for every step:
//   g_t  = h_{t-1} W_hh^T                                          (M, 3H)
//   r, z = sigmoid(gi_t[:, :2H] + b_ih[:2H] + b_hh[:2H] + g_t[:, :2H])
//   hn_t = g_t[:, 2H:] + b_hh[2H:]
//   n_t  = tanh(gi_t[:, 2H:] + b_ih[2H:] + r * hn_t)
//   h_t  = n_t + z * (h_{t-1} - n_t)
// The biases are added here rather than by separate MindSpore ops, and their gradients are column sums
// computed here (two BiasAdd and two ReduceSum kernels over (T*M, .) arrays fewer per pass).
// Tensors are row-major float32: gi (T, M, 3H), h0 (M, H), w_hh (3H, H), b_ih (3H), b_hh (3H).
// "saved" (T, M, 4H) holds [r | z | n | hn] per row for the backward pass.
//
// Every kernel has MindSpore's AOT signature:
//   int f(int nparam, void** params, int* ndims, int64_t** shapes, const char** dtypes, void* stream,
//         void* extra)
// with the inputs first and then the outputs in params; it returns 0 on success.
//
// The matrix products use one register-blocked micro-kernel written with GCC vector extensions (-march=native
// compiles them for the machine): 8 rows x 32 columns in 512-bit vectors where the CPU has AVX-512 and the
// column count is a multiple of 32, else 6 rows x 16 columns in 256-bit vectors (AVX2/FMA) where it is a
// multiple of 16; other sizes use a plain loop. The element-wise gate code likewise takes 16 columns at a
// time with AVX-512, else 8. exp/sigmoid/tanh are written out (no libm call) so the loops vectorise (tests
// hold them to a float64 reference).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

namespace {

typedef float v8 __attribute__((vector_size(32)));
typedef float v8u __attribute__((vector_size(32), aligned(4), may_alias));  // unaligned access to floats

inline v8 load8(const float* p) { return *reinterpret_cast<const v8u*>(p); }
inline void store8(float* p, v8 v) { *reinterpret_cast<v8u*>(p) = v; }

#ifdef __AVX512F__
typedef float v16 __attribute__((vector_size(64)));
typedef float v16u __attribute__((vector_size(64), aligned(4), may_alias));
inline v16 load16(const float* p) { return *reinterpret_cast<const v16u*>(p); }
inline void store16(float* p, v16 v) { *reinterpret_cast<v16u*>(p) = v; }
#endif

// Unaligned vector load/store for the vector types above (float: one value).
template <class V> inline V ldv(const float* p);
template <> inline v8 ldv<v8>(const float* p) { return load8(p); }
inline void stv(float* p, v8 v) { store8(p, v); }
#ifdef __AVX512F__
template <> inline v16 ldv<v16>(const float* p) { return load16(p); }
inline void stv(float* p, v16 v) { store16(p, v); }
#endif

// C[R x 2L] (+)= A[R x K] * B[K x 2L], L the lanes of V; A(r, k) = A[r * ars + k * aks]; B and C
// row-major with ld.
template <class V, int R>
void micro(const float* a, int64_t ars, int64_t aks, const float* b, int64_t ldb, float* c, int64_t ldc,
           int64_t k_len, bool accumulate) {
  constexpr int L = sizeof(V) / sizeof(float);
  V acc0[R], acc1[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    if (accumulate) {
      acc0[r] = ldv<V>(c + r * ldc);
      acc1[r] = ldv<V>(c + r * ldc + L);
    } else {
      acc0[r] = V{};
      acc1[r] = V{};
    }
  }
  for (int64_t k = 0; k < k_len; ++k) {
    const V b0 = ldv<V>(b + k * ldb), b1 = ldv<V>(b + k * ldb + L);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const float s = a[r * ars + k * aks];
      acc0[r] += s * b0;
      acc1[r] += s * b1;
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    stv(c + r * ldc, acc0[r]);
    stv(c + r * ldc + L, acc1[r]);
  }
}

// The blocked product over column blocks of 2L with R-row tiles (and the leftover rows), for one K chunk.
template <class V, int R>
void blocked(int64_t m, int64_t n, int64_t kl, const float* ak, int64_t ars, int64_t aks, const float* bk,
             int64_t ldb, float* c, int64_t ldc, bool acc) {
  constexpr int64_t w = 2 * sizeof(V) / sizeof(float);
  for (int64_t j = 0; j < n; j += w) {
    int64_t i = 0;
    for (; i + R <= m; i += R) micro<V, R>(ak + i * ars, ars, aks, bk + j, ldb, c + i * ldc + j, ldc, kl, acc);
    const float* ai = ak + i * ars;
    float* ci = c + i * ldc + j;
    switch (m - i) {  // R - 1 rows at most are left
      case 7: micro<V, 7>(ai, ars, aks, bk + j, ldb, ci, ldc, kl, acc); break;
      case 6: micro<V, 6>(ai, ars, aks, bk + j, ldb, ci, ldc, kl, acc); break;
      case 5: micro<V, 5>(ai, ars, aks, bk + j, ldb, ci, ldc, kl, acc); break;
      case 4: micro<V, 4>(ai, ars, aks, bk + j, ldb, ci, ldc, kl, acc); break;
      case 3: micro<V, 3>(ai, ars, aks, bk + j, ldb, ci, ldc, kl, acc); break;
      case 2: micro<V, 2>(ai, ars, aks, bk + j, ldb, ci, ldc, kl, acc); break;
      case 1: micro<V, 1>(ai, ars, aks, bk + j, ldb, ci, ldc, kl, acc); break;
      default: break;
    }
  }
}

// The K chunk of gemm (a caller that feeds gemm K in chunks of this size sums in the same order).
constexpr int64_t kChunk = 256;

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
  constexpr int64_t kc = kChunk;
  for (int64_t k0 = 0; k0 < k; k0 += kc) {
    const int64_t kl = k - k0 < kc ? k - k0 : kc;
    const bool acc = accumulate || k0 > 0;
#ifdef __AVX512F__
    if (n % 32 == 0) {  // 8 x 32 tiles: 16 accumulators + 2 B vectors of the 32 zmm registers
      blocked<v16, 8>(m, n, kl, a + k0 * aks, ars, aks, b + k0 * ldb, ldb, c, ldc, acc);
      continue;
    }
#endif
    blocked<v8, 6>(m, n, kl, a + k0 * aks, ars, aks, b + k0 * ldb, ldb, c, ldc, acc);
  }
}

// Loads and stores of one value (float) or eight (v8), so that the element-wise code below is written once.
typedef int32_t v8i __attribute__((vector_size(32)));
template <class V> inline V ld(const float* p) { return ldv<V>(p); }
template <> inline float ld<float>(const float* p) { return *p; }
inline void st(float* p, float v) { *p = v; }
template <class V> inline void st(float* p, V v) { stv(p, v); }
inline float as_float(int32_t bits) { return __builtin_bit_cast(float, bits); }
inline v8 as_float(v8i bits) { return __builtin_bit_cast(v8, bits); }
inline int32_t to_int(float x) { return static_cast<int32_t>(x); }
inline v8i to_int(v8 x) { return __builtin_convertvector(x, v8i); }
#ifdef __AVX512F__
typedef int32_t v16i __attribute__((vector_size(64)));
inline v16 as_float(v16i bits) { return __builtin_bit_cast(v16, bits); }
inline v16i to_int(v16 x) { return __builtin_convertvector(x, v16i); }
#endif

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

// Columns q.. q+width of one row of a forward step (width 16 with V = v16, 8 with v8, 1 with float).
// gi: this row of x W_ih^T (3H); b_rz: b_ih[:2H] + b_hh[:2H]; b_in, b_hn: b_ih[2H:], b_hh[2H:].
template <class V>
inline void fwd_cols(int64_t q, int64_t hd, const float* gi, const float* b_rz, const float* b_in,
                     const float* g, const float* b_hn, const float* hp, float* ht, float* sv) {
  const V r = sigmoid<V>(ld<V>(gi + q) + ld<V>(b_rz + q) + ld<V>(g + q));
  const V z = sigmoid<V>(ld<V>(gi + hd + q) + ld<V>(b_rz + hd + q) + ld<V>(g + hd + q));
  const V hn = ld<V>(g + 2 * hd + q) + ld<V>(b_hn + q);
  const V n = tanh_<V>(ld<V>(gi + 2 * hd + q) + ld<V>(b_in + q) + r * hn);
  st(ht + q, n + z * (ld<V>(hp + q) - n));
  if (sv) {
    st(sv + q, r);
    st(sv + hd + q, z);
    st(sv + 2 * hd + q, n);
    st(sv + 3 * hd + q, hn);
  }
}

// Columns q.. of one row of a backward step: gate gradients (dgi: this row of d gi, 3H; or, where dgi is
// null, only its n part into dn, H: its r and z parts equal dg's), and the direct part of d h_{t-1} into cr.
template <class V>
inline void bwd_cols(int64_t q, int64_t hd, const float* sv, const float* hp, const float* dho, float* cr,
                     float* dg, float* dgi, float* dn) {
  const V r = ld<V>(sv + q), z = ld<V>(sv + hd + q), n = ld<V>(sv + 2 * hd + q), hn = ld<V>(sv + 3 * hd + q);
  const V dh = ld<V>(dho + q) + ld<V>(cr + q);
  const V d_npre = dh * (1.0f - z) * (1.0f - n * n);  // d of the pre-activation gi_n + r * hn
  const V d_r = d_npre * hn * r * (1.0f - r);
  const V d_z = dh * (ld<V>(hp + q) - n) * z * (1.0f - z);
  st(dg + q, d_r);
  st(dg + hd + q, d_z);
  st(dg + 2 * hd + q, d_npre * r);
  if (dgi) {
    st(dgi + q, d_r);
    st(dgi + hd + q, d_z);
    st(dgi + 2 * hd + q, d_npre);
  } else {
    st(dn + q, d_npre);
  }
  st(cr + q, dh * z);  // the direct path h_{t-1} -> h_t; the matrix path is added by the caller
}

struct Dims {
  int64_t t, m, h;
};

// A grow-only scratch array whose new elements are left uninitialised (the kernels write all they read):
// std::vector would zero them first, a pass over up to 120 MB at 27m_vs_30m sizes on the first call.
class Scratch {
 public:
  float* get(int64_t n) {
    if (n > size_) {
      buf_.reset(new float[n]);
      size_ = n;
    }
    return buf_.get();
  }

 private:
  std::unique_ptr<float[]> buf_;
  int64_t size_ = 0;
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
// The GRU's input computed inside (the *X kernels): x = relu(z + b_z), the output of the layer before the
// GRU (z (T*M, I) its product without the bias, time-major rows), and gi = x W_ih^T (w_ih (3H, I)).
struct Input {
  const float* z = nullptr;
  const float* b_z = nullptr;
  const float* w_ih = nullptr;
  int64_t dim = 0;
};

// x = relu(z + b_z) for `rows` rows of width n.
inline void relu_bias(const float* z, const float* b, int64_t rows, int64_t n, float* x) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t q = 0; q < n; ++q) x[r * n + q] = std::max(z[r * n + q] + b[q], 0.0f);
}

// With in.z != nullptr, gi is computed step by step here, for the rows of each step while they are in
// cache, instead of being read from gi_all.
void forward(const Dims& d, const float* gi_all, const float* h0, const float* w_hh, const float* b_ih,
             const float* b_hh, float* h_out, float* saved, const Input& in = Input{}) {
  const int64_t t_len = d.t, m = d.m, hd = d.h, g3 = 3 * hd, in_dim = in.dim;
  const float *z = in.z, *b_z = in.b_z;
  thread_local std::vector<float> wt, wit, b_rz;
  wt.resize(hd * g3);
  for (int64_t j = 0; j < g3; ++j)  // W_hh^T (H, 3H), so each step is one row-major product
    for (int64_t q = 0; q < hd; ++q) wt[q * g3 + j] = w_hh[j * hd + q];
  wit.resize(z ? in_dim * g3 : 0);
  for (int64_t j = 0; z && j < g3; ++j)  // W_ih^T (I, 3H)
    for (int64_t q = 0; q < in_dim; ++q) wit[q * g3 + j] = in.w_ih[j * in_dim + q];
  const float* wi = wit.data();
  b_rz.resize(2 * hd);
  for (int64_t q = 0; q < 2 * hd; ++q) b_rz[q] = b_ih[q] + b_hh[q];  // as the reference adds them
  const float* w = wt.data();
  const float *brz = b_rz.data(), *b_in = b_ih + 2 * hd, *b_hn = b_hh + 2 * hd;
  parallel_chunks(m, 24, t_len * m * (hd + in_dim) * g3, [=](int64_t r0, int64_t r1) {
    std::vector<float> g((r1 - r0) * g3), gx(z ? (r1 - r0) * g3 : 0), xs(z ? (r1 - r0) * in_dim : 0);
    const float* hprev = h0 + r0 * hd;
    for (int64_t t = 0; t < t_len; ++t) {
      gemm(r1 - r0, g3, hd, hprev, hd, 1, w, g3, g.data(), g3, false);
      if (z) {
        relu_bias(z + (t * m + r0) * in_dim, b_z, r1 - r0, in_dim, xs.data());
        gemm(r1 - r0, g3, in_dim, xs.data(), in_dim, 1, wi, g3, gx.data(), g3, false);
      }
      float* ht = h_out + (t * m + r0) * hd;
      for (int64_t i = r0; i < r1; ++i) {
        const float* gh = g.data() + (i - r0) * g3;
        const float* gi = z ? gx.data() + (i - r0) * g3 : gi_all + (t * m + i) * g3;
        const float* hp = hprev + (i - r0) * hd;
        float* ho = ht + (i - r0) * hd;
        float* sv = saved ? saved + (t * m + i) * 4 * hd : nullptr;
        int64_t q = 0;
#ifdef __AVX512F__
        for (; q + 16 <= hd; q += 16) fwd_cols<v16>(q, hd, gi, brz, b_in, gh, b_hn, hp, ho, sv);
#endif
        for (; q + 8 <= hd; q += 8) fwd_cols<v8>(q, hd, gi, brz, b_in, gh, b_hn, hp, ho, sv);
        for (; q < hd; ++q) fwd_cols<float>(q, hd, gi, brz, b_in, gh, b_hn, hp, ho, sv);
      }
      hprev = ht;
    }
  });
}

// out[j] = sum over rows of x[row * ld + j] for j < n, rows in order (so any split of the columns across
// threads gives the same sums).
void column_sums(const float* x, int64_t rows, int64_t ld, int64_t n, float* out) {
  parallel_chunks(n, 16, rows * n, [=](int64_t j0, int64_t j1) {
    std::vector<float> acc(j1 - j0, 0.0f);
    for (int64_t row = 0; row < rows; ++row) {
      const float* xr = x + row * ld + j0;
      for (int64_t j = 0; j < j1 - j0; ++j) acc[j] += xr[j];
    }
    std::copy(acc.begin(), acc.end(), out + j0);
  });
}

// Backward: from dL/dh (T, M, H) to dL/d(gi, h0, W_hh, b_ih, b_hh). With in.z != nullptr (the forward's
// input layer), also d z = relu'(z + b_z) * (d gi W_ih), step by step while the step's d gi rows are in
// cache, d W_ih = d gi^T x and d b_z = column sums of d z. d gi is then not written out: its r and z columns
// are those of dg, and only its n column block (T*M, H) is kept, in this kernel's scratch.
void backward(const Dims& d, const float* dh_out, const float* h, const float* saved, const float* h0,
              const float* w_hh, float* d_gi, float* d_h0, float* d_w, float* d_b_ih, float* d_b_hh,
              const Input& in = Input{}, float* d_z = nullptr, float* d_b_z = nullptr, float* d_w_ih = nullptr) {
  const int64_t t_len = d.t, m = d.m, hd = d.h, g3 = 3 * hd, in_dim = in.dim;
  const float *z = in.z, *b_z = in.b_z, *w_ih = in.w_ih;
  thread_local Scratch dg_buf, dn_buf;
  float* dg_all = dg_buf.get(t_len * m * g3);  // d of [W_hr h, W_hz h, W_hn h + b_hn] for every step
  float* dn_all = z ? dn_buf.get(t_len * m * hd) : nullptr;  // d gi's n block (with z)
  if (z) d_gi = nullptr;
  std::memset(d_h0, 0, sizeof(float) * m * hd);  // the carried dL/dh_{t-1}, which ends as dL/dh0
  parallel_chunks(m, 24, t_len * m * (hd + in_dim) * g3, [=](int64_t r0, int64_t r1) {
    std::vector<float> dx(z ? (r1 - r0) * in_dim : 0);
    for (int64_t t = t_len - 1; t >= 0; --t) {
      const float* hprev = t > 0 ? h + (t - 1) * m * hd : h0;
      float* dg = dg_all + t * m * g3;
      for (int64_t i = r0; i < r1; ++i) {
        const float* sv = saved + (t * m + i) * 4 * hd;
        const float* dho = dh_out + (t * m + i) * hd;
        float* dgi = d_gi ? d_gi + (t * m + i) * g3 : nullptr;
        float* dn = dn_all ? dn_all + (t * m + i) * hd : nullptr;
        float* cr = d_h0 + i * hd;
        float* dgr = dg + i * g3;
        const float* hp = hprev + i * hd;
        int64_t q = 0;
#ifdef __AVX512F__
        for (; q + 16 <= hd; q += 16) bwd_cols<v16>(q, hd, sv, hp, dho, cr, dgr, dgi, dn);
#endif
        for (; q + 8 <= hd; q += 8) bwd_cols<v8>(q, hd, sv, hp, dho, cr, dgr, dgi, dn);
        for (; q < hd; ++q) bwd_cols<float>(q, hd, sv, hp, dho, cr, dgr, dgi, dn);
      }
      gemm(r1 - r0, hd, g3, dg + r0 * g3, g3, 1, w_hh, hd, d_h0 + r0 * hd, hd, true);
      if (z) {  // d z = relu'(z + b_z) * (d gi W_ih): d gi's r, z columns are dg's, its n columns dn's
        const int64_t row = t * m + r0;
        gemm(r1 - r0, in_dim, 2 * hd, dg_all + row * g3, g3, 1, w_ih, in_dim, dx.data(), in_dim, false);
        gemm(r1 - r0, in_dim, hd, dn_all + row * hd, hd, 1, w_ih + 2 * hd * in_dim, in_dim, dx.data(), in_dim,
             true);
        for (int64_t r = 0; r < r1 - r0; ++r) {
          const float* zr = z + (row + r) * in_dim;
          float* dzr = d_z + (row + r) * in_dim;
          for (int64_t q = 0; q < in_dim; ++q) dzr[q] = zr[q] + b_z[q] > 0.0f ? dx[r * in_dim + q] : 0.0f;
        }
      }
    }
  });
  if (z) {  // d W_ih = d gi^T x over all T*M rows, split by rows of d W_ih, x = relu(z + b_z) formed again
    // chunk by chunk of gemm's K (not kept from the forward: a (T*M, I) array less); d b_z
    parallel_chunks(g3, 16, t_len * m * in_dim * g3, [=](int64_t j0, int64_t j1) {
      std::vector<float> xc(kChunk * in_dim);
      const int64_t ja = std::min(j1, 2 * hd), jb = std::max(j0, 2 * hd);  // [j0, ja) from dg, [jb, j1) dn
      for (int64_t k0 = 0; k0 < t_len * m; k0 += kChunk) {
        const int64_t kl = std::min(kChunk, t_len * m - k0);
        relu_bias(z + k0 * in_dim, b_z, kl, in_dim, xc.data());
        if (ja > j0)
          gemm(ja - j0, in_dim, kl, dg_all + k0 * g3 + j0, 1, g3, xc.data(), in_dim, d_w_ih + j0 * in_dim,
               in_dim, k0 > 0);
        if (j1 > jb)
          gemm(j1 - jb, in_dim, kl, dn_all + k0 * hd + (jb - 2 * hd), 1, hd, xc.data(), in_dim,
               d_w_ih + jb * in_dim, in_dim, k0 > 0);
      }
    });
    column_sums(d_z, t_len * m, in_dim, in_dim, d_b_z);
  }
  // d W_hh = sum_t dg_t^T h_{t-1}: the t = 0 block against h0, then the others against h[0..T-2]; split by
  // rows of d W_hh (columns of dg)
  parallel_chunks(g3, 16, t_len * m * hd * g3, [=](int64_t j0, int64_t j1) {
    gemm(j1 - j0, hd, m, dg_all + j0, 1, g3, h0, hd, d_w + j0 * hd, hd, false);
    if (t_len > 1) gemm(j1 - j0, hd, (t_len - 1) * m, dg_all + m * g3 + j0, 1, g3, h, hd, d_w + j0 * hd, hd, true);
  });
  // bias gradients: d b_ih = column sums of d gi; d b_hh = those of [d r, d z] (the same) and of d(W_hn h + b_hn)
  if (d_gi) {
    column_sums(d_gi, t_len * m, g3, g3, d_b_ih);
  } else {  // d gi = [dg's r, z columns | dn]
    column_sums(dg_all, t_len * m, g3, 2 * hd, d_b_ih);
    column_sums(dn_all, t_len * m, hd, hd, d_b_ih + 2 * hd);
  }
  std::copy(d_b_ih, d_b_ih + 2 * hd, d_b_hh);
  column_sums(dg_all + 2 * hd, t_len * m, g3, hd, d_b_hh + 2 * hd);
}

bool all_float32(int nparam, const char** dtypes) {
  for (int i = 0; i < nparam; ++i)
    if (std::strcmp(dtypes[i], "float32") != 0) return false;
  return true;
}

Dims dims_of(int64_t** shapes, int h_index) { return Dims{shapes[0][0], shapes[0][1], shapes[h_index][1]}; }

}  // namespace

extern "C" {

// inputs gi (T, M, 3H), h0, w_hh, b_ih, b_hh; output h (T, M, H).
int GruSeqForward(int nparam, void** params, int* ndims, int64_t** shapes, const char** dtypes, void* stream,
                  void* extra) {
  (void)ndims, (void)stream, (void)extra;
  if (nparam != 6 || !all_float32(nparam, dtypes)) return 1;
  float** p = reinterpret_cast<float**>(params);
  forward(dims_of(shapes, 1), p[0], p[1], p[2], p[3], p[4], p[5], nullptr);
  return 0;
}

// inputs gi (T, M, 3H), h0, w_hh, b_ih, b_hh; outputs h (T, M, H), saved (T, M, 4H).
int GruSeqForwardSave(int nparam, void** params, int* ndims, int64_t** shapes, const char** dtypes,
                      void* stream, void* extra) {
  (void)ndims, (void)stream, (void)extra;
  if (nparam != 7 || !all_float32(nparam, dtypes)) return 1;
  float** p = reinterpret_cast<float**>(params);
  forward(dims_of(shapes, 1), p[0], p[1], p[2], p[3], p[4], p[5], p[6]);
  return 0;
}

// The same two with the GRU's input computed inside (see Input): inputs z (T*M, I), b_z (I), h0 (M, H),
// w_ih (3H, I), w_hh, b_ih, b_hh; outputs h (T, M, H) (and saved (T, M, 4H)).
static int run_forward_x(int nparam, void** params, int64_t** shapes, const char** dtypes, bool save) {
  if (nparam != (save ? 9 : 8) || !all_float32(nparam, dtypes)) return 1;
  float** p = reinterpret_cast<float**>(params);
  const int64_t m = shapes[2][0];
  if (m <= 0 || shapes[0][0] % m != 0) return 1;
  const Dims d{shapes[0][0] / m, m, shapes[2][1]};
  const Input in{p[0], p[1], p[3], shapes[0][1]};
  forward(d, nullptr, p[2], p[4], p[5], p[6], p[7], save ? p[8] : nullptr, in);
  return 0;
}

int GruSeqForwardX(int nparam, void** params, int* ndims, int64_t** shapes, const char** dtypes, void* stream,
                   void* extra) {
  (void)ndims, (void)stream, (void)extra;
  return run_forward_x(nparam, params, shapes, dtypes, false);
}

int GruSeqForwardSaveX(int nparam, void** params, int* ndims, int64_t** shapes, const char** dtypes,
                       void* stream, void* extra) {
  (void)ndims, (void)stream, (void)extra;
  return run_forward_x(nparam, params, shapes, dtypes, true);
}

// inputs dh (T, M, H), h (T, M, H), saved (T, M, 4H), h0 (M, H), w_hh (3H, H);
// outputs d_gi (T, M, 3H), d_h0 (M, H), d_w_hh (3H, H), d_b_ih (3H), d_b_hh (3H).
int GruSeqBackward(int nparam, void** params, int* ndims, int64_t** shapes, const char** dtypes, void* stream,
                   void* extra) {
  (void)ndims, (void)stream, (void)extra;
  if (nparam != 10 || !all_float32(nparam, dtypes)) return 1;
  float** p = reinterpret_cast<float**>(params);
  backward(dims_of(shapes, 3), p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9]);
  return 0;
}

// The backward of GruSeqForwardSaveX: inputs dh (T, M, H), h (T, M, H), saved (T, M, 4H), h0 (M, H),
// w_hh (3H, H), z (T*M, I), b_z (I), w_ih (3H, I); outputs d_z (T*M, I), d_b_z (I), d_h0 (M, H),
// d_w_ih (3H, I), d_w_hh (3H, H), d_b_ih (3H), d_b_hh (3H).
int GruSeqBackwardX(int nparam, void** params, int* ndims, int64_t** shapes, const char** dtypes, void* stream,
                    void* extra) {
  (void)ndims, (void)stream, (void)extra;
  if (nparam != 15 || !all_float32(nparam, dtypes)) return 1;
  float** p = reinterpret_cast<float**>(params);
  const Input in{p[5], p[6], p[7], shapes[5][1]};
  backward(dims_of(shapes, 3), p[0], p[1], p[2], p[3], p[4], nullptr, p[10], p[12], p[13], p[14], in, p[8], p[9],
           p[11]);
  return 0;
}

}  // extern "C"
