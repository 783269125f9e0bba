// Decode: one sequence's step reads every weight once, so on a CPU it should stream at the
// memory's read rate. Where the kernels stream well below it, their arithmetic (unpacking
// and scaling quantized blocks) is the limit, and the fix is more cores or a format whose
// kernel is cheaper here, not a smaller one.
#include <fmt/format.h>

#include "doctor/checks.h"

namespace pagoda {

void check_decode_bound(const DoctorFacts& f, std::vector<Finding>& out) {
  if (!f.decode) return;
  const DecodeFacts& d = *f.decode;
  if (d.matrix_s <= 0 || d.stream_bytes_per_s <= 0) return;
  const double achieved = d.weight_bytes_per_step / d.matrix_s;
  const double share = achieved / d.stream_bytes_per_s;
  if (share >= kComputeBoundShare) return;
  Finding x;
  x.id = "decode.compute_bound";
  x.severity = Severity::kWarning;
  x.what = fmt::format("decode streams the weights at {:.1f} GB/s, {:.0f}% of the {:.1f} GB/s {} thread{} read memory at",
                       achieved / 1e9, 100 * share, d.stream_bytes_per_s / 1e9, d.threads, d.threads == 1 ? "" : "s");
  x.why = fmt::format("the {} kernels' arithmetic, not the memory, limits each decode step; a smaller format would "
                      "not make it faster",
                      d.bulk_format);
  std::string best;
  double best_rate = 0;
  for (const auto& [name, rate] : d.format_rates)
    if (name != d.bulk_format && rate > best_rate) best = name, best_rate = rate;
  double bulk_rate = 0;
  for (const auto& [name, rate] : d.format_rates)
    if (name == d.bulk_format) bulk_rate = rate;
  if (d.threads < d.cores)
    x.fix = fmt::format("-t {} (all {} usable cores: the arithmetic spreads over them)", d.cores, d.cores);
  else if (!best.empty() && best_rate > 1.2 * bulk_rate)
    x.fix = fmt::format("pagoda quantize --type {} (its kernel streams {:.1f} GB/s here, {} {:.1f})", best,
                        best_rate / 1e9, d.bulk_format, bulk_rate / 1e9);
  else
    x.fix = "nothing in the configuration: every core is in use and no measured format streams faster; expect "
            "decode to scale with cores, not with bytes per weight";
  x.data = {{"achieved_bytes_per_s", achieved}, {"stream_bytes_per_s", d.stream_bytes_per_s}, {"share", share},
            {"threads", d.threads}, {"cores", d.cores}, {"format", d.bulk_format}};
  out.push_back(std::move(x));
}

}  // namespace pagoda
