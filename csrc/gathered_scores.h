// Attention scores of sampled instances whose inputs are rows of small tables, on the CPU.
//
// For instance p of root b = p / per_root and head m, with input parts i (a table X_i of
// distinct rows [U_i, K_i], the instance's row index_i[p], and the root's pulled-back
// query slice Q_i [B, H, K_i]):
//
//   scores[p, m] = sum_i Q_i[b, m, :] . X_i[index_i[p], :]
//
// the same as gathering every instance's input rows and multiplying, without the gathered
// [N, K] tensors (the path encoder's last hop: 60,000 instances, ~15,000 distinct rows).
#pragma once

#include <cstdint>
#include <vector>

namespace tbdfs {

struct ScoreParts {
  std::vector<const float*> query;  // Q_i [B, H, K_i]
  std::vector<const float*> rows;   // X_i [U_i, K_i]
  std::vector<const int64_t*> index;  // [N], checked in range by the caller
  std::vector<int64_t> width;       // K_i
};

void gathered_scores_forward(int64_t num_roots, int64_t per_root, int64_t heads,
                             const ScoreParts& parts, float* scores, int num_threads);

// grad_query[i] [B, H, K_i] is overwritten; grad_rows[i] [U_i, K_i] must be zeroed (either
// list may hold nullptr for a part whose gradient is not wanted).  Fixed summation order:
// the result does not depend on num_threads.
void gathered_scores_backward(int64_t num_roots, int64_t per_root, int64_t heads,
                              const ScoreParts& parts, const float* grad_scores,
                              const std::vector<float*>& grad_query,
                              const std::vector<float*>& grad_rows, int num_threads);

}  // namespace tbdfs
