#include "quant/quant_strategy.h"

#include "quant/formats.h"
#include "quant/quantize_matrix.h"

namespace pagoda {

Status RtnStrategy::quantize(const QuantJob& job, ThreadPool& pool) {
  if (!can_quantize(job.type)) return error("tensor '{}': cannot encode {}", job.name, dtype_name(job.type));
  const int64_t block = dtype_info(job.type).block_size;
  if (job.cols % block != 0)
    return error("tensor '{}': rows of {} values do not split into {} blocks of {}", job.name, job.cols,
                 dtype_name(job.type), block);
  quantize_matrix(job.type, job.weights, job.rows, job.cols, job.dst, pool);
  return Status::ok();
}

}  // namespace pagoda
