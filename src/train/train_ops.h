// Forward and backward of the Llama ops over a batch of rows, for training.
//
// Conventions: a matrix W is stored as GGUF stores it, n_out rows of n_in (row-major), so a linear
// layer is Y = X W^T over rows of X. Forward functions compute with the inference ops (ops/) where
// one exists, so a trained model means the same thing to `grove run`; backward functions ADD into
// their gradient outputs (dx, dw), so gradients of shared tensors accumulate. Every function is
// checked against finite differences in tests/train_grad_test.cc.
//
// Every function takes an optional thread pool (train/parallel.h): with one, its work is split over
// the pool's threads, each matrix product a single-threaded call of train/gemm.h (OpenBLAS, opened
// on first use); without, it runs on the calling thread. The result does not depend on the pool
// beyond the rounding of the products.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "ops/rope.h"

namespace grove {

class ThreadPool;

// Y(rows x n_out) = X(rows x n_in) W^T.
void LinearForward(const float* x, const float* w, float* y, int rows, int n_in, int n_out,
                   ThreadPool* pool = nullptr);
// dX += dY W; dW += dY^T X. A null dx or dw is not computed (a frozen tensor, an input).
void LinearBackward(const float* x, const float* w, const float* dy, float* dx, float* dw, int rows,
                    int n_in, int n_out, ThreadPool* pool = nullptr);

// y = x * rstd * w per row, rstd = 1 / sqrt(mean(x^2) + eps) (saved, rows values).
void RmsNormForward(const float* x, const float* w, float* y, float* rstd, int rows, int n,
                    float eps, ThreadPool* pool = nullptr);
// A null dw is not computed (a frozen gain).
void RmsNormBackward(const float* x, const float* w, const float* rstd, const float* dy, float* dx,
                     float* dw, int rows, int n, ThreadPool* pool = nullptr);

// (n_rot / 2) {cos, sin} pairs for each position 0..n_positions-1 (RopeAngles), or with `inverse`
// those of the opposite angles. A rotation is orthogonal, so its backward pass is the rotation by
// the opposite angle: the forward pass rotates with the table, the backward pass with its inverse.
std::vector<float> RopeAngleTable(const RopeParams& p, int n_positions, bool inverse);

// Rotates n_heads heads of each row in place by the table's angles; row r has position
// positions[r].
void RopeRotate(const RopeParams& p, const float* table, std::span<const int32_t> positions,
                float* x, int n_heads, ThreadPool* pool = nullptr);

// Causal self-attention of n_seq sequences of seq_len rows each (rows = n_seq * seq_len), n_heads
// heads of head_dim, q/k/v/out laid out (rows x n_heads * head_dim). probs (n_seq * n_heads *
// seq_len * seq_len) keeps the softmax for the backward pass: row i is zero from i + 1 to the end
// of its block of keys, and what lies past the block is never written nor read. Heads are
// split over the pool; within a head the products go by blocks of kAttentionBlock query rows, each
// against only the keys it can see, so the masked half of the scores is never computed.
struct AttentionShape {
  int n_seq = 0;
  int seq_len = 0;
  int n_heads = 0;
  int head_dim = 0;
};
inline constexpr int kAttentionBlock = 64;
void CausalAttentionForward(const AttentionShape& s, const float* q, const float* k, const float* v,
                            float* probs, float* out, ThreadPool* pool = nullptr);
// Gradients of q, k, v (overwritten, not added). scratch: seq_len * seq_len floats for each thread
// of the pool (one without a pool).
void CausalAttentionBackward(const AttentionShape& s, const float* q, const float* k,
                             const float* v, const float* probs, const float* dout, float* dq,
                             float* dk, float* dv, float* scratch, ThreadPool* pool = nullptr);

// Attention in which each query row sees a listed set of key rows, all rows in one array (rows x
// n_heads * head_dim for q, k, v and out): the keys of row i are visible[visible_begin[i] ..
// visible_begin[i + 1]), each < rows. Any mask is a list: causal, a token tree, or ParallelSpec's
// groups (a mask row sees the real rows up to its anchor and its own group's earlier masks). probs
// holds n_heads * visible_begin[rows] floats for the backward pass. Heads are split over the pool.
struct ListedAttentionShape {
  int rows = 0;
  int n_heads = 0;
  int head_dim = 0;
};
void ListedAttentionForward(const ListedAttentionShape& s, std::span<const int32_t> visible_begin,
                            std::span<const int32_t> visible, const float* q, const float* k,
                            const float* v, float* probs, float* out, ThreadPool* pool = nullptr);
// Gradients of q, k, v (overwritten, not added).
void ListedAttentionBackward(const ListedAttentionShape& s, std::span<const int32_t> visible_begin,
                             std::span<const int32_t> visible, const float* q, const float* k,
                             const float* v, const float* probs, const float* dout, float* dq,
                             float* dk, float* dv, ThreadPool* pool = nullptr);

// out = silu(gate) * up (the inference op), and its backward: dgate, dup overwritten.
void SwiGluForward(const float* gate, const float* up, float* out, int64_t n,
                   ThreadPool* pool = nullptr);
void SwiGluBackward(const float* gate, const float* up, const float* dout, float* dgate, float* dup,
                    int64_t n, ThreadPool* pool = nullptr);

// Mean cross-entropy of rows of logits (rows x n_vocab) against targets; writes d(loss)/d(logits)
// into dlogits. Returns the mean loss. Accumulates in double.
double CrossEntropy(const float* logits, const int32_t* targets, float* dlogits, int rows,
                    int n_vocab, ThreadPool* pool = nullptr);

// Mean KL(teacher || student) over rows, both given as logits: sum_v p_t (log p_t - log p_s).
// Writes d(loss)/d(student logits) = (p_s - p_t) / rows into dlogits. With row_weights the loss is
// sum_r w_r KL_r instead (no mean) and row r's gradient w_r (p_s - p_t).
double DistillKl(const float* student_logits, const float* teacher_logits, float* dlogits, int rows,
                 int n_vocab, ThreadPool* pool = nullptr, const float* row_weights = nullptr);

}  // namespace grove
