// Fused CPU kernels for a small model's fp32 training step (see __init__.py for why).
//
// block_forward / block_backward: one pre-norm transformer block of prism/model/backbone.py
//   x2  = x + o(attention(rope(q), rope(k), v)),  [q | k | v] = qkv(rms_norm(x))
//   out = x2 + down(silu(gate) * up),              [gate | up] = gate_up(rms_norm(x2))
// Projections go through at::mm (the BLAS ATen uses); attention over short rows is explicit
// (per batch element and head, register-tiled matmuls around one softmax pass, skipping what the
// causal mask zeroes), over long rows ATen's CPU flash kernel; the element-wise work (norms,
// rotary, SwiGLU, residuals) is one loop each. Each loop is a named range in torch.profiler.
//
// encoder_block_forward / encoder_block_backward: one block of the modality encoder.
//
// cross_entropy_forward / cross_entropy_backward: the mean next-token loss over labelled
// rows, one pass over the logits each way.
#include <ATen/Parallel.h>
#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>
#include <ATen/record_function.h>
#include <torch/extension.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

namespace {

using Vec = at::vec::Vectorized<float>;
constexpr int64_t kGrain = 64;  // rows per parallel task

// A named range in torch.profiler for the loop it opens.
#define PRISM_RANGE(name) RECORD_FUNCTION(name, c10::ArrayRef<const c10::IValue>{})

const float* f32(const torch::Tensor& t) { return t.data_ptr<float>(); }
float* f32(torch::Tensor& t) { return t.data_ptr<float>(); }

// h = x * rstd(x) * w over rows of D; rstd kept for the backward.
void rms_norm_forward(const float* x, const float* w, float* h, float* rstd, int64_t T, int64_t D, double eps) {
  PRISM_RANGE("prism::rms_norm_forward");
  at::parallel_for(0, T, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const float* xr = x + t * D;
      const float ss = at::vec::map_reduce_all<float>([](Vec a) { return a * a; },
                                                      [](Vec a, Vec b) { return a + b; }, xr, D);
      const float r = 1.f / std::sqrt(ss / D + static_cast<float>(eps));
      rstd[t] = r;
      float* hr = h + t * D;
      for (int64_t d = 0; d < D; ++d) hr[d] = xr[d] * r * w[d];
    }
  });
}

// dx += rstd (g w) - x rstd^3 mean(g w x); dw += sum over rows of g x rstd.
void rms_norm_backward(const float* g, const float* x, const float* w, const float* rstd, float* dx, float* dw,
                       int64_t T, int64_t D) {
  PRISM_RANGE("prism::rms_norm_backward");
  const int64_t threads = at::get_num_threads();
  std::vector<float> partial(threads * D, 0.f);  // dw per thread, summed after: no races
  at::parallel_for(0, T, kGrain, [&](int64_t begin, int64_t end) {
    float* __restrict acc = partial.data() + at::get_thread_num() * D;
    for (int64_t t = begin; t < end; ++t) {
      const float* __restrict gr = g + t * D;
      const float* __restrict xr = x + t * D;
      const float r = rstd[t];
      const float dot = at::vec::map3_reduce_all<float>([](Vec a, Vec b, Vec c) { return a * b * c; },
                                                        [](Vec a, Vec b) { return a + b; }, gr, w, xr, D);
      const float c = dot * r * r * r / D;
      float* __restrict o = dx + t * D;
      for (int64_t d = 0; d < D; ++d) {
        o[d] += r * gr[d] * w[d] - c * xr[d];
        acc[d] += gr[d] * xr[d] * r;
      }
    }
  });
  for (int64_t i = 0; i < threads; ++i)
    for (int64_t d = 0; d < D; ++d) dw[d] += partial[i * D + d];
}

// Blocks keep q, k and v head-major, [3, B, H, L, hd], so that attention reads each head's as
// contiguous [L, hd] operands (as does ATen's flash kernel); the qkv projection's rows are
// [T, 3 H hd]. Moves rows to heads (to_heads) or back, rotating q and k on the way (rot
// non-null) and copying the rest: rotary positions pair adjacent features, rot [L, hd/2, 2]
// holds (cos, sin) per position and pair, and sign -1 rotates back (the backward).
void rope_heads(const float* src, float* dst, const float* rot, int64_t B, int64_t L, int64_t heads, int64_t hd,
                float sign, bool to_heads) {
  PRISM_RANGE("prism::rope_heads");
  const int64_t half = hd / 2, row = 3 * heads * hd;
  at::parallel_for(0, B * L, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t b = t / L, l = t % L;
      const float* cs = rot == nullptr ? nullptr : rot + l * hd;
      for (int64_t h = 0; h < 3 * heads; ++h) {
        const int64_t head_major = (((h / heads) * B + b) * heads + h % heads) * L * hd + l * hd;
        const int64_t row_major = t * row + h * hd;
        const float* __restrict a = src + (to_heads ? row_major : head_major);
        float* __restrict o = dst + (to_heads ? head_major : row_major);
        if (rot == nullptr || h >= 2 * heads) {
          std::copy(a, a + hd, o);
          continue;
        }
        for (int64_t p = 0; p < half; ++p) {
          const float c = cs[2 * p], s = sign * cs[2 * p + 1], x0 = a[2 * p], x1 = a[2 * p + 1];
          o[2 * p] = x0 * c - x1 * s;
          o[2 * p + 1] = x0 * s + x1 * c;
        }
      }
    }
  });
}

// Rows up to this length take explicit attention: per (batch, head), the L x L probabilities
// from small register-tiled matmuls and one softmax pass. On operands this small the BLAS's
// batched matmuls spend most of their time outside arithmetic, and ATen's flash kernel in its
// per-block bookkeeping; the explicit path stays the faster through 256 positions (heads of
// 32-64, docs/measurements.md). Past that the flash kernel, whose memory does not grow as L^2.
constexpr int64_t kExplicitMaxLen = 256;

// Which part of a small product is needed under a causal mask, for a row tile i0..i0+rows of C.
enum class Band {
  kAll,         // all of it (no mask)
  kColsToDiag,  // scores: columns up to the diagonal (those past it may be left unwritten)
  kKToDiag,     // C = A B with A lower triangular: sum over k up to the diagonal
  kKFromDiag,   // C = A^T B with A lower triangular: sum over k from the diagonal
};

// The band a product keeps under a causal mask; without one, all of it.
Band masked(bool causal, Band band) { return causal ? band : Band::kAll; }

// C[r, v-th vector] = sum over k in [k0, k1) of A(r, k) B[k, :], for MR rows and NV vectors of
// columns held in registers; A(r, k) = a[r sai + k sak], so A may be read transposed.
template <int MR, int NV>
inline void mm_tile(const float* a, int64_t sai, int64_t sak, const float* b, int64_t ldb, float* c, int64_t ldc,
                    int64_t k0, int64_t k1) {
  std::array<std::array<Vec, NV>, MR> acc;
  for (auto& row : acc) row.fill(Vec(0.f));
  for (int64_t k = k0; k < k1; ++k) {
    std::array<Vec, NV> bk;
    for (int v = 0; v < NV; ++v) bk[v] = Vec::loadu(b + k * ldb + v * Vec::size());
    for (int r = 0; r < MR; ++r) {
      const Vec ar(a[r * sai + k * sak]);
      for (int v = 0; v < NV; ++v) acc[r][v] = at::vec::fmadd(ar, bk[v], acc[r][v]);
    }
  }
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NV; ++v) acc[r][v].store(c + r * ldc + v * Vec::size());
}

template <int NV>
inline void mm_rows(int64_t rows, const float* a, int64_t sai, int64_t sak, const float* b, int64_t ldb, float* c,
                    int64_t ldc, int64_t k0, int64_t k1) {
  if (rows == 4) return mm_tile<4, NV>(a, sai, sak, b, ldb, c, ldc, k0, k1);
  for (int64_t r = 0; r < rows; ++r) mm_tile<1, NV>(a + r * sai, sai, sak, b, ldb, c + r * ldc, ldc, k0, k1);
}

// C [M, N] = A [M, K] B [K, N] for attention's operands (M, N, K up to kExplicitMaxLen): B and C
// row-major with leading dimensions ldb, ldc; A strided (sai, sak), so P^T and dS^T need no copy.
// `band` skips what a causal mask makes zero or unneeded.
void small_mm(const float* a, int64_t sai, int64_t sak, const float* b, int64_t ldb, float* c, int64_t ldc, int64_t M,
              int64_t N, int64_t K, Band band) {
  constexpr int64_t MR = 4, W = Vec::size();
  if (N % W != 0) {
    // Heads (or rows) of a width no multiple of the vector: B padded with zero columns and C
    // through a padded copy cost K + M rows of copying, a scalar tail K times as much.
    const int64_t Np = (N + W - 1) / W * W;
    thread_local std::vector<float> bp, cp;
    bp.resize(K * Np);
    cp.resize(M * Np);
    for (int64_t k = 0; k < K; ++k) {
      std::copy(b + k * ldb, b + k * ldb + N, bp.data() + k * Np);
      std::fill(bp.data() + k * Np + N, bp.data() + (k + 1) * Np, 0.f);
    }
    small_mm(a, sai, sak, bp.data(), Np, cp.data(), Np, M, Np, K, band);
    for (int64_t i = 0; i < M; ++i) std::copy(cp.data() + i * Np, cp.data() + i * Np + N, c + i * ldc);
    return;
  }
  for (int64_t i = 0; i < M; i += MR) {
    const int64_t rows = std::min(MR, M - i);
    const int64_t k0 = band == Band::kKFromDiag ? i : 0;
    const int64_t k1 = band == Band::kKToDiag ? std::min(K, i + rows) : K;
    // Whole vectors up to the diagonal: the few columns past it cost less than a scalar tail.
    const int64_t n = band == Band::kColsToDiag ? std::min(N, (i + rows + W - 1) / W * W) : N;
    const float* ai = a + i * sai;
    float* ci = c + i * ldc;
    int64_t j = 0;
    for (; j + 2 * W <= n; j += 2 * W) mm_rows<2>(rows, ai, sai, sak, b + j, ldb, ci + j, ldc, k0, k1);
    if (j < n) mm_rows<1>(rows, ai, sai, sak, b + j, ldb, ci + j, ldc, k0, k1);
  }
}

// dst [cols, rows] = src [rows, cols]^T: K and V as the right operand of Q K^T and dO V^T.
void transpose(const float* src, float* dst, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) dst[c * rows + r] = src[r * cols + c];
}

// In place, each row i of s [L, L]: softmax(scale s) over s[i, 0..i] and zeros after if causal
// (the columns after the diagonal are not read), over the whole row otherwise.
void softmax_rows(float* s, int64_t L, float scale, bool causal) {
  for (int64_t i = 0; i < L; ++i) {
    float* x = s + i * L;
    const int64_t n = causal ? i + 1 : L;
    const float mx = at::vec::reduce_all<float>([](Vec a, Vec b) { return at::vec::maximum(a, b); }, x, n);
    const Vec vscale(scale), vshift(-scale * mx);
    Vec vsum(0.f);
    int64_t j = 0;
    for (; j + Vec::size() <= n; j += Vec::size()) {
      const Vec e = at::vec::fmadd(Vec::loadu(x + j), vscale, vshift).exp_u20();
      e.store(x + j);
      vsum = vsum + e;
    }
    float sum = at::vec::vec_reduce_all<float>([](Vec a, Vec b) { return a + b; }, vsum);
    for (; j < n; ++j) sum += x[j] = std::exp(scale * x[j] - scale * mx);
    const float inv = 1.f / sum;
    for (j = 0; j < n; ++j) x[j] *= inv;
    std::fill(x + n, x + L, 0.f);
  }
}

// In place, dp [L, L] becomes the scores' gradient: scale p (dp - rowsum(p dp)), and zeros where
// the mask put zeros in p (whatever dp held there).
void softmax_backward_rows(const float* p, float* dp, int64_t L, float scale, bool causal) {
  for (int64_t i = 0; i < L; ++i) {
    const float* pr = p + i * L;
    float* d = dp + i * L;
    const int64_t n = causal ? i + 1 : L;
    const float dot = at::vec::map2_reduce_all<float>([](Vec a, Vec b) { return a * b; },
                                                      [](Vec a, Vec b) { return a + b; }, pr, d, n);
    at::vec::map2<float>([scale, dot](Vec a, Vec b) { return Vec(scale) * a * (b - Vec(dot)); }, d, pr, d, n);
    std::fill(d + n, d + L, 0.f);
  }
}

// act = silu(gate) * up for rows gu = [gate | up] of 2F. Nothing else is stored: the backward
// recomputes sig(gate), which costs less than writing and reading back silu and silu'.
void swiglu_forward(const float* gu, float* act, int64_t T, int64_t F) {
  PRISM_RANGE("prism::swiglu_forward");
  at::parallel_for(0, T, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const float* g = gu + t * 2 * F;
      const float* u = g + F;
      float* a = act + t * F;
      int64_t f = 0;
      for (; f + Vec::size() <= F; f += Vec::size()) {
        const Vec x = Vec::loadu(g + f), one(1.f);
        (x / (one + x.neg().exp_u20()) * Vec::loadu(u + f)).store(a + f);
      }
      for (; f < F; ++f) a[f] = g[f] / (1.f + std::exp(-g[f])) * u[f];
    }
  });
}

// In place, gu = [gate | up] becomes its gradient [da up silu'(gate) | da silu(gate)],
// silu'(x) = sig(x) (1 + x (1 - sig(x))): the rows just read are the rows written, so no fresh
// memory is written (the block's backward consumes its saved gu).
void swiglu_backward(const float* da, float* gu, int64_t T, int64_t F) {
  PRISM_RANGE("prism::swiglu_backward");
  at::parallel_for(0, T, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      float* g = gu + t * 2 * F;
      float* u = g + F;
      const float* d = da + t * F;
      int64_t f = 0;
      for (; f + Vec::size() <= F; f += Vec::size()) {
        const Vec x = Vec::loadu(g + f), uu = Vec::loadu(u + f), dd = Vec::loadu(d + f), one(1.f);
        const Vec sig = one / (one + x.neg().exp_u20());
        (dd * x * sig).store(u + f);
        (dd * uu * sig * (one + x * (one - sig))).store(g + f);
      }
      for (; f < F; ++f) {
        const float x = g[f], uu = u[f], sig = 1.f / (1.f + std::exp(-x));
        u[f] = d[f] * x * sig;
        g[f] = d[f] * uu * sig * (1.f + x * (1.f - sig));
      }
    }
  });
}

struct Shape {
  int64_t B, L, D, T, heads, hd, F;
  float scale() const { return 1.f / std::sqrt(static_cast<float>(hd)); }  // attention's, as SDPA's default
};

Shape shape_of(const torch::Tensor& x, const torch::Tensor& w_qkv, const torch::Tensor& w_down, int64_t heads) {
  const int64_t B = x.size(0), L = x.size(1);
  return {B, L, x.size(2), B * L, heads, w_qkv.size(0) / (3 * heads), w_down.size(1)};
}

// Attention on head-major qkvh [3, B H, L, hd]: the output as rows y [T, H hd] (the input of the
// output projection) and what the backward needs besides y (the probabilities [B H, L, L], or
// the flash kernel's log-sum-exps).
std::pair<torch::Tensor, torch::Tensor> attention_forward(const Shape& s, const torch::Tensor& qkvh, bool causal) {
  auto q = qkvh[0], k = qkvh[1], v = qkvh[2];
  if (s.L > kExplicitMaxLen) {
    auto view = [&](const torch::Tensor& t) { return t.view({s.B, s.heads, s.L, s.hd}); };
    auto [att, lse] = at::_scaled_dot_product_flash_attention_for_cpu(view(q), view(k), view(v), 0.0, causal,
                                                                      std::nullopt, std::nullopt);
    return {att.transpose(1, 2).reshape({s.T, s.heads * s.hd}), lse};  // att's memory is already [B, L, H, hd]
  }
  // One (batch, head) at a time: its q, k, v and probabilities stay in cache from the scores to y.
  auto y = torch::empty({s.T, s.heads * s.hd}, qkvh.options());
  auto p = torch::empty({s.B * s.heads, s.L, s.L}, qkvh.options());
  const int64_t L = s.L, hd = s.hd, row = s.heads * s.hd, head = L * hd;
  const float *Q = f32(q), *K = f32(k), *V = f32(v);
  float *P = f32(p), *Y = f32(y);
  at::parallel_for(0, s.B * s.heads, 1, [&](int64_t begin, int64_t end) {
    PRISM_RANGE("prism::attention_forward");
    std::vector<float> kt(hd * L);
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / s.heads, h = bh % s.heads;
      float* ph = P + bh * L * L;
      float* yh = Y + b * L * row + h * hd;  // y's rows for this batch element, this head's columns
      transpose(K + bh * head, kt.data(), L, hd);
      small_mm(Q + bh * head, hd, 1, kt.data(), L, ph, L, L, L, hd, masked(causal, Band::kColsToDiag));
      softmax_rows(ph, L, s.scale(), causal);
      small_mm(ph, L, 1, V + bh * head, hd, yh, row, L, hd, L, masked(causal, Band::kKToDiag));
    }
  });
  return {y, p};
}

// dy [T, H hd] to the gradient of qkvh; y and stats as attention_forward returned them.
torch::Tensor attention_backward(const Shape& s, const torch::Tensor& dy, const torch::Tensor& qkvh,
                                 const torch::Tensor& y, const torch::Tensor& stats, bool causal) {
  auto q = qkvh[0], k = qkvh[1], v = qkvh[2];
  auto d_qkvh = torch::empty_like(qkvh);
  auto dq = d_qkvh[0], dk = d_qkvh[1], dv = d_qkvh[2];
  if (s.L > kExplicitMaxLen) {
    auto dyh = dy.view({s.B, s.L, s.heads, s.hd}).transpose(1, 2);
    auto view = [&](const torch::Tensor& t) { return t.view({s.B, s.heads, s.L, s.hd}); };
    auto [gq, gk, gv] = at::_scaled_dot_product_flash_attention_for_cpu_backward(
        dyh, view(q), view(k), view(v), y.view({s.B, s.L, s.heads, s.hd}).transpose(1, 2), stats, 0.0, causal,
        std::nullopt, std::nullopt);
    view(dq).copy_(gq);
    view(dk).copy_(gk);
    view(dv).copy_(gv);
    return d_qkvh;
  }
  // dV = P^T dO, dP = dO V^T, dS = softmax'(dP), dQ = dS K, dK = dS^T Q, one (batch, head) at a time.
  TORCH_CHECK(dy.is_contiguous(), "attention_backward: dy must be contiguous rows");
  const int64_t L = s.L, hd = s.hd, row = s.heads * s.hd, head = L * hd;
  const float *Q = f32(q), *K = f32(k), *V = f32(v), *P = f32(stats), *DY = f32(dy);
  float *DQ = f32(dq), *DK = f32(dk), *DV = f32(dv);
  at::parallel_for(0, s.B * s.heads, 1, [&](int64_t begin, int64_t end) {
    PRISM_RANGE("prism::attention_backward");
    std::vector<float> vt(hd * L), ds(L * L);
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / s.heads, h = bh % s.heads;
      const float* ph = P + bh * L * L;
      const float* dyh = DY + b * L * row + h * hd;
      small_mm(ph, 1, L, dyh, row, DV + bh * head, hd, L, hd, L, masked(causal, Band::kKFromDiag));
      transpose(V + bh * head, vt.data(), L, hd);
      small_mm(dyh, row, 1, vt.data(), L, ds.data(), L, L, L, hd, masked(causal, Band::kColsToDiag));
      softmax_backward_rows(ph, ds.data(), L, s.scale(), causal);
      small_mm(ds.data(), L, 1, K + bh * head, hd, DQ + bh * head, hd, L, hd, L, masked(causal, Band::kKToDiag));
      small_mm(ds.data(), 1, L, Q + bh * head, hd, DK + bh * head, hd, L, hd, L, masked(causal, Band::kKFromDiag));
    }
  });
  return d_qkvh;
}

void check_inputs(const std::vector<torch::Tensor>& tensors) {
  for (const auto& t : tensors) {
    TORCH_CHECK(t.device().is_cpu() && t.scalar_type() == torch::kFloat32, "prism cpu kernels: fp32 CPU tensors only");
    TORCH_CHECK(t.is_contiguous(), "prism cpu kernels: contiguous tensors only");
  }
}

}  // namespace

// x [B, L, D]; weights as nn.Linear stores them ([out, in]); rot [L, hd/2, 2] (cos, sin).
// Returns the block's output, then what block_backward needs.
std::vector<torch::Tensor> block_forward(torch::Tensor x, torch::Tensor w_attn_norm, torch::Tensor w_qkv,
                                         torch::Tensor w_o, torch::Tensor w_mlp_norm, torch::Tensor w_gate_up,
                                         torch::Tensor w_down, torch::Tensor rot, int64_t heads, double eps) {
  x = x.contiguous();
  check_inputs({x, w_attn_norm, w_qkv, w_o, w_mlp_norm, w_gate_up, w_down, rot});
  const Shape s = shape_of(x, w_qkv, w_down, heads);
  const auto opts = x.options();
  auto x2d = x.view({s.T, s.D});
  auto rstd1 = torch::empty({s.T}, opts), h1 = torch::empty({s.T, s.D}, opts);
  rms_norm_forward(f32(x2d), f32(w_attn_norm), f32(h1), f32(rstd1), s.T, s.D, eps);
  auto qkv = at::mm(h1, w_qkv.t());
  auto qkvh = torch::empty({3, s.B * s.heads, s.L, s.hd}, opts);
  rope_heads(f32(qkv), f32(qkvh), f32(rot), s.B, s.L, s.heads, s.hd, 1.f, true);
  auto [y, stats] = attention_forward(s, qkvh, true);
  auto x2 = at::addmm(x2d, y, w_o.t());
  auto rstd2 = torch::empty({s.T}, opts), h2 = torch::empty({s.T, s.D}, opts);
  rms_norm_forward(f32(x2), f32(w_mlp_norm), f32(h2), f32(rstd2), s.T, s.D, eps);
  auto gu = at::mm(h2, w_gate_up.t());
  auto act = torch::empty({s.T, s.F}, opts);
  swiglu_forward(f32(gu), f32(act), s.T, s.F);
  auto out = at::addmm(x2, act, w_down.t());
  return {out.view({s.B, s.L, s.D}), x2d, rstd1, h1, qkvh, stats, y, x2, rstd2, h2, gu, act};
}

// grad [B, L, D] and block_forward's saved tensors; returns dx and the six weights' gradients.
std::vector<torch::Tensor> block_backward(torch::Tensor grad, std::vector<torch::Tensor> saved,
                                          torch::Tensor w_attn_norm, torch::Tensor w_qkv, torch::Tensor w_o,
                                          torch::Tensor w_mlp_norm, torch::Tensor w_gate_up, torch::Tensor w_down,
                                          torch::Tensor rot, int64_t heads) {
  TORCH_CHECK(saved.size() == 11, "block_backward: expected block_forward's 11 saved tensors");
  const auto &x = saved[0], &rstd1 = saved[1], &h1 = saved[2], &qkvh = saved[3], &stats = saved[4], &y = saved[5],
             &x2 = saved[6], &rstd2 = saved[7], &h2 = saved[8], &gu = saved[9], &act = saved[10];
  const Shape s = shape_of(grad, w_qkv, w_down, heads);
  auto g = grad.contiguous().view({s.T, s.D});
  const auto opts = g.options();
  // MLP half. dx accumulates the residual stream's gradient: g, then each norm's share.
  auto d_down = at::mm(g.t(), act);
  auto d_act = at::mm(g, w_down);
  auto d_gu = gu;  // the saved activations' last use: its gradient takes its memory
  swiglu_backward(f32(d_act), f32(d_gu), s.T, s.F);
  auto d_gate_up = at::mm(d_gu.t(), h2);
  auto d_h2 = at::mm(d_gu, w_gate_up);
  auto dx = g.clone();
  auto d_mlp_norm = torch::zeros({s.D}, opts);
  rms_norm_backward(f32(d_h2), f32(x2), f32(w_mlp_norm), f32(rstd2), f32(dx), f32(d_mlp_norm), s.T, s.D);
  // Attention half.
  auto d_o = at::mm(dx.t(), y);
  auto dy = at::mm(dx, w_o);
  auto d_qkvh = attention_backward(s, dy, qkvh, y, stats, true);
  auto d_qkv = torch::empty({s.T, 3 * s.heads * s.hd}, opts);
  rope_heads(f32(d_qkvh), f32(d_qkv), f32(rot), s.B, s.L, s.heads, s.hd, -1.f, false);
  auto d_qkv_w = at::mm(d_qkv.t(), h1);
  auto d_h1 = at::mm(d_qkv, w_qkv);
  auto d_attn_norm = torch::zeros({s.D}, opts);
  rms_norm_backward(f32(d_h1), f32(x), f32(w_attn_norm), f32(rstd1), f32(dx), f32(d_attn_norm), s.T, s.D);
  return {dx.view({s.B, s.L, s.D}), d_attn_norm, d_qkv_w, d_o, d_mlp_norm, d_gate_up, d_down};
}

// encoder_block_forward / encoder_block_backward: one EncoderBlock of prism/model/encoders.py
//   x2  = x + proj(attention(q, k, v)),  [q | k | v] = qkv(layer_norm1(x))   (bidirectional)
//   out = x2 + fc2(gelu(fc1(layer_norm2(x2))))
// LayerNorm and GELU are ATen's own kernels, called without autograd's bookkeeping; attention
// is the backbone block's, without the mask or the rotation.
// w: norm1 (weight, bias), qkv (weight, bias), proj (w, b), norm2 (w, b), fc1 (w, b), fc2 (w, b).
std::vector<torch::Tensor> encoder_block_forward(torch::Tensor x, std::vector<torch::Tensor> w, int64_t heads,
                                                 double eps) {
  x = x.contiguous();
  TORCH_CHECK(w.size() == 12, "encoder_block_forward: 12 weights");
  const int64_t S = x.size(0), L = x.size(1), D = x.size(2), T = S * L, hd = D / heads;
  const Shape s{S, L, D, T, heads, hd, 0};
  auto x2d = x.view({T, D});
  auto [h1, mean1, rstd1] = at::native_layer_norm(x2d, {D}, w[0], w[1], eps);
  auto qkv = at::addmm(w[3], h1, w[2].t());
  auto qkvh = torch::empty({3, S * heads, L, hd}, x.options());
  rope_heads(f32(qkv), f32(qkvh), nullptr, S, L, heads, hd, 1.f, true);
  auto [y, stats] = attention_forward(s, qkvh, false);
  auto x2 = at::addmm(x2d, y, w[4].t()).add_(w[5]);
  auto [h2, mean2, rstd2] = at::native_layer_norm(x2, {D}, w[6], w[7], eps);
  auto m = at::addmm(w[9], h2, w[8].t());
  auto a = at::gelu(m);
  auto out = at::addmm(x2, a, w[10].t()).add_(w[11]);
  return {out.view({S, L, D}), x2d, h1, mean1, rstd1, qkvh, stats, y, x2, h2, mean2, rstd2, m, a};
}

std::vector<torch::Tensor> encoder_block_backward(torch::Tensor grad, std::vector<torch::Tensor> saved,
                                                  std::vector<torch::Tensor> w, int64_t heads) {
  TORCH_CHECK(saved.size() == 13 && w.size() == 12, "encoder_block_backward: 13 saved tensors, 12 weights");
  const auto &x = saved[0], &h1 = saved[1], &mean1 = saved[2], &rstd1 = saved[3], &qkvh = saved[4],
             &stats = saved[5], &y = saved[6], &x2 = saved[7], &h2 = saved[8], &mean2 = saved[9], &rstd2 = saved[10],
             &m = saved[11], &a = saved[12];
  const int64_t S = grad.size(0), L = grad.size(1), D = grad.size(2), T = S * L, hd = D / heads;
  const Shape s{S, L, D, T, heads, hd, 0};
  const std::array<bool, 3> all{true, true, true};
  auto g = grad.contiguous().view({T, D});
  auto d_fc2 = at::mm(g.t(), a);
  auto d_fc2_b = g.sum(0);
  auto dm = at::gelu_backward(at::mm(g, w[10]), m);
  auto d_fc1 = at::mm(dm.t(), h2);
  auto d_fc1_b = dm.sum(0);
  auto [dh2, d_norm2, d_norm2_b] =
      at::native_layer_norm_backward(at::mm(dm, w[8]), x2, {D}, mean2, rstd2, w[6], w[7], all);
  auto dx2 = dh2.add_(g);
  auto d_proj = at::mm(dx2.t(), y);
  auto d_proj_b = dx2.sum(0);
  auto d_qkvh = attention_backward(s, at::mm(dx2, w[4]), qkvh, y, stats, false);
  auto d_qkv2d = torch::empty({T, 3 * D}, g.options());
  rope_heads(f32(d_qkvh), f32(d_qkv2d), nullptr, S, L, heads, hd, 1.f, false);
  auto d_qkv_w = at::mm(d_qkv2d.t(), h1);
  auto d_qkv_b = d_qkv2d.sum(0);
  auto [dh1, d_norm1, d_norm1_b] =
      at::native_layer_norm_backward(at::mm(d_qkv2d, w[2]), x, {D}, mean1, rstd1, w[0], w[1], all);
  auto dx = dh1.add_(dx2);
  return {dx.view({S, L, D}), d_norm1, d_norm1_b, d_qkv_w, d_qkv_b, d_proj, d_proj_b,
          d_norm2,            d_norm2_b, d_fc1,  d_fc1_b, d_fc2,   d_fc2_b};
}

// logits [T, V], labels [T] (int64, `ignore` for unlabelled rows). Returns the mean loss over
// labelled rows, each row's log-sum-exp, and the number of labelled rows.
std::vector<torch::Tensor> cross_entropy_forward(torch::Tensor logits, torch::Tensor labels, int64_t ignore) {
  check_inputs({logits});  // contiguous as given: the backward reads the same saved tensors
  TORCH_CHECK(labels.scalar_type() == torch::kInt64 && labels.numel() == logits.size(0) && labels.is_contiguous(),
              "cross_entropy: one int64 label per row of logits, contiguous");
  const int64_t T = logits.size(0), V = logits.size(1);
  auto lse = torch::empty({T}, logits.options());
  const float* X = f32(logits);
  const int64_t* Y = labels.data_ptr<int64_t>();
  float* S = f32(lse);
  const int64_t threads = at::get_num_threads();
  std::vector<double> sums(threads, 0.0);
  std::vector<int64_t> counts(threads, 0);
  at::parallel_for(0, T, kGrain, [&](int64_t begin, int64_t end) {
    double sum = 0.0;
    int64_t count = 0;
    for (int64_t t = begin; t < end; ++t) {
      const int64_t y = Y[t];
      S[t] = 0.f;
      if (y == ignore) continue;
      TORCH_CHECK(y >= 0 && y < V, "cross_entropy: label ", y, " is out of range [0, ", V, ")");
      const float* x = X + t * V;
      const float m = at::vec::reduce_all<float>([](Vec a, Vec b) { return at::vec::maximum(a, b); }, x, V);
      const float e = at::vec::map_reduce_all<float>([m](Vec a) { return (a - Vec(m)).exp(); },
                                                     [](Vec a, Vec b) { return a + b; }, x, V);
      S[t] = m + std::log(e);
      sum += S[t] - x[y];
      ++count;
    }
    sums[at::get_thread_num()] += sum;
    counts[at::get_thread_num()] += count;
  });
  double sum = 0.0;
  int64_t count = 0;
  for (int64_t i = 0; i < threads; ++i) {
    sum += sums[i];
    count += counts[i];
  }
  auto loss = torch::full({}, count ? static_cast<float>(sum / count) : NAN, logits.options());
  return {loss, lse, torch::full({}, count, labels.options())};
}

// d logits = grad / count * (softmax(logits) - onehot(label)) on labelled rows, 0 elsewhere.
torch::Tensor cross_entropy_backward(torch::Tensor grad, torch::Tensor logits, torch::Tensor labels,
                                     torch::Tensor lse, int64_t count, int64_t ignore) {
  const int64_t T = logits.size(0), V = logits.size(1);
  auto dlogits = torch::empty_like(logits);
  const float g = grad.item<float>() / static_cast<float>(std::max<int64_t>(count, 1));
  const float* X = f32(logits);
  const int64_t* Y = labels.data_ptr<int64_t>();
  const float* S = f32(lse);
  float* D = f32(dlogits);
  at::parallel_for(0, T, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      float* d = D + t * V;
      if (Y[t] == ignore) {
        std::fill(d, d + V, 0.f);
        continue;
      }
      const float s = S[t];
      at::vec::map([s, g](Vec a) { return (a - Vec(s)).exp() * Vec(g); }, d, X + t * V, V);
      d[Y[t]] -= g;
    }
  });
  return dlogits;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("block_forward", &block_forward);
  m.def("block_backward", &block_backward);
  m.def("encoder_block_forward", &encoder_block_forward);
  m.def("encoder_block_backward", &encoder_block_backward);
  m.def("cross_entropy_forward", &cross_entropy_forward);
  m.def("cross_entropy_backward", &cross_entropy_backward);
}
