#include "TrainerLog.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "nnsc/Support/File.h"

namespace nnsc::rt {

std::string withThousands(double value) {
  std::string digits = fmt::format("{:.0f}", std::max(0.0, value));
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0)
      out += ',';
    out += digits[i];
  }
  return out;
}

std::string formatDuration(double seconds) {
  int64_t s = std::isfinite(seconds) && seconds > 0 ? int64_t(std::llround(seconds)) : 0;
  return fmt::format("{}:{:02d}:{:02d}", s / 3600, (s / 60) % 60, s % 60);
}

std::string formatProgressLine(const StepRecord &r) {
  std::string scale;
  if (r.lossScale)
    scale = fmt::format(" | loss scale {:g}{}", *r.lossScale,
                        r.skipped ? " (inf/nan gradients: step skipped)" : "");
  return fmt::format(
      "step {}/{} | loss {:.4f} | lr {:.1e} | grad-norm {:.3f} | {} tok/s | eta {}{}{}", r.step,
      r.steps, r.loss, r.lr, r.gradNorm, withThousands(r.tokensPerS), formatDuration(r.etaSeconds),
      scale, r.profiled ? " | profiled" : "");
}

std::string formatValidationLine(const StepRecord &r) {
  return fmt::format("step {}/{} | val loss {:.4f}", r.step, r.steps, r.valLoss.value_or(0));
}

std::string formatMetricsRecord(const StepRecord &r) {
  nlohmann::json j = {{"step", r.step},
                      {"loss", r.loss},
                      {"lr", r.lr},
                      {"grad_norm", r.gradNorm},
                      {"tokens_per_s", r.tokensPerS},
                      {"step_s", r.stepSeconds},
                      {"elapsed_s", r.elapsedSeconds}};
  if (r.fwdBwdSeconds) {
    j["fwd_bwd_s"] = *r.fwdBwdSeconds;
    j["comm_s"] = r.commSeconds.value_or(0);
    j["grad_sync_s"] = r.gradSyncSeconds.value_or(0);
    j["optimizer_s"] = r.optimizerSeconds.value_or(0);
  }
  if (r.valLoss)
    j["val_loss"] = *r.valLoss;
  if (r.lossScale)
    j["loss_scale"] = *r.lossScale;
  if (r.profiled)
    j["profiled"] = true; // its times include the profiler's
  if (r.skipped) {
    j["skipped"] = true;
    j["grad_norm"] = nullptr; // NaN is not JSON
  }
  return j.dump();
}

bool metricsBeyond(const std::string &path, int64_t step) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.is_object() && j.value("step", int64_t(0)) > step)
      return true;
  }
  return false;
}

void truncateMetrics(const std::string &path, int64_t step) {
  std::ifstream in(path);
  if (!in)
    return;
  std::string line, kept;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.is_object() && j.value("step", int64_t(0)) <= step)
      kept += line + "\n";
  }
  (void)writeFileAtomic(path, kept);
}

} // namespace nnsc::rt
