// The attention layer kind of the CPU backend (cpu_forward.h): projections, per-head norms and
// rotation, keys and values into the cache, attention over each token's visible keys, and the
// output projection.
#include <cmath>
#include <cstring>

#include "kernels/kernel_set.h"
#include "model/batch_layout.h"
#include "model/config.h"
#include "model/cpu_forward.h"
#include "model/kv_cache_pool.h"
#include "model/rotary_tables.h"
#include "model/weights.h"
#include "ops/attention.h"
#include "ops/norm.h"
#include "ops/parallel.h"
#include "ops/rope.h"

namespace grove {

void CpuForward::Attention(const ForwardInput& input, int32_t layer) {
  const LayerWeights& w = weights_.layers[layer];
  const int32_t n = input.layout.size();
  const bool gated = config_.family->gated_attention;
  ProjectQkv(w, n);
  if (gated) SplitQueryGate(n);
  RotateAndCache(input, layer);
  Attend(input, layer);
  if (gated) GateAttentionOutput(n);
  MatMul(w.wo, att_.data(), n, proj_.data(), matmul_scratch_, pool_);
  AddBiasRows(w.bo, proj_.data(), n);
}

void CpuForward::SplitQueryGate(int32_t n) {
  // Each head's 2 head_dim rows of the joint projection: its query, then its gate.
  const std::size_t head = config_.head_dim;
  const std::size_t q_dim = config_.q_dim();
  for (std::size_t i = 0; i < static_cast<std::size_t>(n); ++i) {
    const float* qg = qg_.data() + i * 2 * q_dim;
    for (std::size_t h = 0; h < static_cast<std::size_t>(config_.n_head); ++h) {
      std::memcpy(q_.data() + i * q_dim + h * head, qg + 2 * h * head, head * sizeof(float));
      std::memcpy(gate_q_.data() + i * q_dim + h * head, qg + (2 * h + 1) * head,
                  head * sizeof(float));
    }
  }
}

void CpuForward::GateAttentionOutput(int32_t n) {
  const std::size_t size = static_cast<std::size_t>(n) * config_.q_dim();
  for (std::size_t j = 0; j < size; ++j) att_[j] *= 1.0f / (1.0f + std::exp(-gate_q_[j]));
}

void CpuForward::ProjectQkv(const LayerWeights& w, int32_t n) {
  // Q, K and V read the same normalised rows: one dispatch, activations quantized once (see
  // MatMulFused).
  float* q = config_.family->gated_attention ? qg_.data() : q_.data();
  const MatMulOutput qkv[] = {{w.wq, q}, {w.wk, k_.data()}, {w.wv, v_.data()}};
  if (CanFuseMatMuls(qkv)) {
    MatMulFused(qkv, xb_.data(), n, matmul_scratch_, pool_);
  } else {
    for (const MatMulOutput& out : qkv) MatMul(out.w, xb_.data(), n, out.y, matmul_scratch_, pool_);
  }
  AddBiasRows(w.bq, q_.data(), n);
  AddBiasRows(w.bk, k_.data(), n);
  AddBiasRows(w.bv, v_.data(), n);
}

void CpuForward::RotateAndCache(const ForwardInput& input, int32_t layer) {
  // Tokens are independent (each writes its own cache slot): a prompt's are spread over the
  // threads; a few tokens stay on the calling thread, where a dispatch would cost more.
  const int64_t n = input.layout.size();
  const int64_t elements = n * (config_.q_dim() + 2 * int64_t{config_.kv_dim()});
  ParallelForWork(pool_, n, ElementwiseMacs(elements), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) RotateAndCacheToken(input, layer, i);
  });
}

void CpuForward::RotateAndCacheToken(const ForwardInput& input, int32_t layer, int64_t i) {
  const ModelConfig& c = config_;
  const LayerWeights& w = weights_.layers[layer];
  const std::size_t q_dim = c.q_dim();
  const std::size_t kv_dim = c.kv_dim();
  const std::size_t head = c.head_dim;
  float* q = q_.data() + i * q_dim;
  float* k = k_.data() + i * kv_dim;
  if (!w.q_norm.empty()) {
    for (std::size_t h = 0; h < q_dim; h += head)
      RmsNorm(q + h, w.q_norm.data(), q + h, head, c.rms_eps);
    for (std::size_t h = 0; h < kv_dim; h += head)
      RmsNorm(k + h, w.k_norm.data(), k + h, head, c.rms_eps);
  }
  const RopeParams& rope = input.rotary.params(layer);
  const float* cs = input.rotary.batch_rows(layer) + static_cast<std::size_t>(i) * c.n_rot;
  RopeApply(rope, cs, q, c.n_head);
  RopeApply(rope, cs, k, c.n_head_kv);
  KvCache& cache = kv_.cache(input.batch.seq_ids[i]);
  const int32_t slot = input.layout.slot()[i];
  const float* v = v_.data() + i * kv_dim;
  if (cache.type() == KvCacheType::kF16) {
    const ToF16Fn to_f16 = ActiveKernels().to_f16;
    to_f16(k, cache.key_f16(layer, slot), static_cast<int64_t>(kv_dim));
    to_f16(v, cache.value_f16(layer, slot), static_cast<int64_t>(kv_dim));
  } else {
    std::memcpy(cache.key(layer, slot), k, sizeof(float) * kv_dim);
    std::memcpy(cache.value(layer, slot), v, sizeof(float) * kv_dim);
  }
}

void CpuForward::Attend(const ForwardInput& input, int32_t layer) {
  const ModelConfig& c = config_;
  const BatchLayout& layout = input.layout;
  const int32_t q_dim = c.q_dim();
  const int32_t kv_dim = c.kv_dim();
  const int32_t heads_per_kv = c.n_head / c.n_head_kv;
  const bool local = c.is_local(layer);
  const LayerWeights& w = weights_.layers[layer];
  // One task per (query group, head): a group's queries read their shared prefix together
  // (ops/attention.h), each with the bits it would get alone.
  auto attend = [&](int32_t group, int32_t h, float* scores) {
    const int32_t first = layout.query_group_begin()[group];
    const int32_t n_q = layout.query_group_begin()[group + 1] - first;
    const KvCache& cache = kv_.cache(input.batch.seq_ids[first]);
    const std::size_t head = static_cast<std::size_t>(h) * c.head_dim;
    const std::size_t group_at = static_cast<std::size_t>(h / heads_per_kv) * c.head_dim;
    const bool f16 = cache.type() == KvCacheType::kF16;
    const QueryGroup queries{
        .q = q_.data() + static_cast<std::size_t>(first) * q_dim + head,
        .q_stride = q_dim,
        .n_q = n_q,
        .keys = f16 ? nullptr : cache.key(layer, 0) + group_at,
        .values = f16 ? nullptr : cache.value(layer, 0) + group_at,
        .row_stride = kv_dim,
        .n_prefix = layout.prefix_len()[first],
        .extra_begin = layout.extra_begin() + first,
        .extra = layout.extra(),
        .head_dim = c.head_dim,
        .scale = c.query_scale,
        .out = att_.data() + static_cast<std::size_t>(first) * q_dim + head,
        .out_stride = q_dim,
        .prefix_begin = local ? layout.window_prefix_begin() + first : nullptr,
        .extra_first = local ? layout.window_extra_first() + first : nullptr,
        .ring = cache.ring_rows(layer),
        .keys_f16 = f16 ? cache.key_f16(layer, 0) + group_at : nullptr,
        .values_f16 = f16 ? cache.value_f16(layer, 0) + group_at : nullptr,
        .sink = w.attn_sinks.empty() ? nullptr : &w.attn_sinks[static_cast<std::size_t>(h)],
    };
    AttendQueries(queries, scores);
  };
  AttendInParallel(pool_, layout.group_keys(), c.n_head, c.head_dim, scores_.data(),
                   scores_per_thread_, attend);
}

}  // namespace grove
