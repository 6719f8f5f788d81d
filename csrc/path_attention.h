// Attention of each root's BFS query over its paths (tBDFS's path aggregator), on the CPU.
//
// For root b with P paths of width D (feat [B, P, D], mask [B, P]) and H heads of its
// pulled-back query (query [B, H, D], see tbdfs_dgl/nn/path_aggregator.py):
//
//   prob[b, h, :]  = softmax over the present paths p of  query[b, h] . feat[b, p]
//                    (0 on absent paths; all 0 for a root without any path)
//   weight[b, h, p] = prob[b, h, p] * drop[b, h, p]        (drop omitted: weight = prob)
//   agg[b, h]      = sum_p weight[b, h, p] * feat[b, p]
//
// drop holds the attention dropout's factors (0 or 1 / (1 - rate)).  One root's paths (P * D floats) stay in
// cache between the score pass and the weighted sum: what torch does as batched products,
// a masked softmax and their backward in ~10 passes over the [B, P, D] features takes one
// pass forward and one backward here.
#pragma once

#include <cstdint>

namespace tbdfs {

struct PathAttnShape {
  int64_t roots;  // B
  int64_t paths;  // P
  int64_t heads;  // H
  int64_t width;  // D
};

// weight may be nullptr when drop is (it would equal prob).
void path_attention_forward(const PathAttnShape& s, const float* feat, const float* query,
                            const uint8_t* mask, const float* drop, float* prob,
                            float* weight, float* agg, int num_threads);

// Gradients from grad_agg [B, H, D] and grad_weight [B, H, P] (nullptr: none reached the
// weights).  grad_feat [B, P, D] (nullptr: not wanted) and grad_query [B, H, D] are
// overwritten; every root is independent, so the result does not depend on num_threads.
void path_attention_backward(const PathAttnShape& s, const float* feat, const float* query,
                             const uint8_t* mask, const float* drop, const float* prob,
                             const float* grad_agg, const float* grad_weight,
                             float* grad_feat, float* grad_query, int num_threads);

}  // namespace tbdfs
