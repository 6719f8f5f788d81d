#include "tables.h"

#include <string>

#include "common.h"
#include "parallel.h"

namespace tbdfs {

LayerTableArrays dense_table(const Hop& hop, int64_t k, int num_threads, int64_t rows) {
  if (rows < 0) rows = hop.num_dst;
  if (rows < hop.num_dst)
    throw InputError("a table of " + std::to_string(hop.num_dst) + " destinations cannot have " +
                     std::to_string(rows) + " rows");
  LayerTableArrays t;
  t.num_dst = rows;
  t.k = k;
  const int64_t n = rows * k;
  t.nbr = Buffer<int64_t>(n);
  t.mask = Buffer<uint8_t>(n);
  t.dt = Buffer<double>(n);
  t.eid = Buffer<int64_t>(n);
  for (int64_t d = 0; d < hop.num_dst; ++d) {
    const int64_t c = hop.indptr[d + 1] - hop.indptr[d];
    if (c > k)
      throw InputError("destination " + std::to_string(d) + " has " + std::to_string(c) +
                       " sampled neighbours, more than the table width " + std::to_string(k));
  }
  // Rows are independent; each is written exactly once (tables are megabytes per batch).
  parallel_for(rows, num_threads, 4096, [&](int64_t lo, int64_t hi) {
    for (int64_t d = lo; d < hi; ++d) {
      const bool real = d < hop.num_dst;
      const int64_t first = real ? hop.indptr[d] : 0;
      const int64_t c = real ? hop.indptr[d + 1] - first : 0;
      int64_t* nbr = t.nbr.data() + d * k;
      uint8_t* mask = t.mask.data() + d * k;
      double* dt = t.dt.data() + d * k;
      int64_t* eid = t.eid.data() + d * k;
      for (int64_t j = 0; j < c; ++j) {
        nbr[j] = hop.num_dst + first + j;
        mask[j] = 1;
        dt[j] = hop.dt[first + j];
        eid[j] = hop.eid[first + j];
      }
      for (int64_t j = c; j < k; ++j) {
        nbr[j] = 0;
        mask[j] = 0;
        dt[j] = 0.0;
        eid[j] = -1;
      }
    }
  });
  return t;
}

}  // namespace tbdfs
