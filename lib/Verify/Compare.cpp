// nnsc-verify's comparison and report: every step's loss, then every
// parameter and buffer of the final state_dict, then one verdict line.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "VerifyImpl.h"
#include "nnsc/Runtime/MergeCheckpoint.h"

namespace nnsc::verify {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// step -> loss from nnsc-run's metrics (rank 0's JSONL).
Expected<std::map<int64_t, double>> readLosses(const Job &job) {
  std::string path = job.runDir + "/metrics.jsonl";
  std::ifstream in(path);
  if (!in)
    return errorf("{}: error: nnsc-run wrote no metrics", path);
  std::map<int64_t, double> losses;
  for (std::string line; std::getline(in, line);) {
    try {
      auto j = nlohmann::json::parse(line);
      // nnsc-run writes a loss that is not finite as null (JSON has no NaN).
      if (j.contains("loss"))
        losses[j.at("step").get<int64_t>()] =
            j.at("loss").is_null() ? std::nan("") : j.at("loss").get<double>();
    } catch (const std::exception &e) {
      return errorf("{}: error: bad metrics line '{}': {}", path, line, e.what());
    }
  }
  return losses;
}

struct LossRow {
  int step;
  std::optional<double> nnsc;
  double ref, diff, rel;
  bool ok;
};

std::vector<LossRow> lossRows(const std::map<int64_t, double> &nnsc, const ReferenceRun &ref,
                              double rtol) {
  std::vector<LossRow> rows;
  for (size_t i = 0; i < ref.losses.size(); ++i) {
    LossRow r{int(i + 1), std::nullopt, ref.losses[i], kInf, kInf, false};
    if (auto it = nnsc.find(r.step); it != nnsc.end()) {
      r.nnsc = it->second;
      r.diff = std::abs(it->second - r.ref);
      r.rel = r.diff / std::max(std::abs(r.ref), 1e-12);
      r.ok = r.rel <= rtol; // NaN fails
    }
    rows.push_back(r);
  }
  return rows;
}

struct TensorRow {
  std::string name, kind, note;
  double rel = 0;
  bool ok = true, compared = true;
};

// max |a - b| / max |ref|, in double; infinity when a NaN appears on one side only.
double relDiff(const at::Tensor &got, const at::Tensor &want) {
  if (want.numel() == 0)
    return 0;
  at::Tensor g = got.to(at::kDouble), w = want.to(at::kDouble);
  at::Tensor d = (g - w).abs().masked_fill(g.isnan() & w.isnan(), 0);
  double worst = d.nan_to_num(kInf).max().item<double>();
  double scale = w.abs().masked_fill(w.isnan(), 0).max().item<double>();
  return worst / std::max(scale, 1e-12);
}

std::string shapeText(const at::Tensor &t) {
  return fmt::format("[{}]", fmt::join(t.sizes(), ", "));
}

// Every tensor is compared: buffers that training writes follow copy 0's
// batches in nnsc-run (data_parallel.buffers: broadcast) and in the reference.
bool skipped(const ReferenceRun::Entry &, const Job &) { return false; }

TensorRow tensorRow(const ReferenceRun::Entry &e, const std::map<std::string, at::Tensor> &merged,
                    const Job &job) {
  TensorRow r{e.name, e.buffer ? "buffer" : "param", "", 0, true, true};
  if (skipped(e, job)) {
    r.compared = false;
    r.note = fmt::format("not compared: training writes it and each of the {} data-parallel "
                         "copies keeps its own",
                         job.dpCopies);
    return r;
  }
  auto it = merged.find(e.name);
  if (it == merged.end()) {
    r.ok = false, r.rel = kInf, r.note = "missing from the merged checkpoint";
    return r;
  }
  if (it->second.sizes() != e.value.sizes()) {
    r.ok = false, r.rel = kInf;
    r.note = fmt::format("shape {}, expected {}", shapeText(it->second), shapeText(e.value));
    return r;
  }
  r.rel = relDiff(it->second, e.value);
  r.ok = r.rel <= job.weightsRtol; // NaN fails
  return r;
}

std::string num(double v) {
  return std::isnan(v) ? "nan" : std::isinf(v) ? "inf" : fmt::format("{:.2e}", v);
}

// A loss in 8 decimals; NaN without its sign bit ("-nan" says nothing more).
std::string lossText(double v) { return std::isnan(v) ? "nan" : fmt::format("{:.8f}", v); }

void printHeader(const VerifyOptions &o, const Job &job, std::ostream &out) {
  const auto &opt = job.optimizer;
  std::string optText =
      opt.name == "sgd"
          ? fmt::format("sgd lr {:g} momentum {:g}", opt.lr, opt.momentum)
          : fmt::format("{} lr {:g} weight decay {:g}", opt.name, opt.lr, opt.weightDecay);
  out << fmt::format("nnsc-verify: {} under policy {}: {} ranks = {} data-parallel x {} per "
                     "copy; {} steps, micro-batch {}, accumulation {}, {}\n",
                     job.modelClass, o.policy, job.ranks, job.dpCopies, job.planNgpus, o.steps,
                     job.microBatch, o.accumulation, optText);
}

void printLosses(const std::vector<LossRow> &rows, std::ostream &out) {
  out << fmt::format("{:>4}  {:>14}  {:>14}  {:>9}  {:>9}\n", "step", "nnsc loss", "reference loss",
                     "|diff|", "rel diff");
  for (const auto &r : rows)
    out << fmt::format("{:>4}  {:>14}  {:>14}  {:>9}  {:>9}  {}\n", r.step,
                       r.nnsc ? lossText(*r.nnsc) : std::string("(none)"), lossText(r.ref),
                       num(r.diff), num(r.rel), r.ok ? "ok" : "FAIL");
}

void printTensors(const std::vector<TensorRow> &rows, std::ostream &out) {
  size_t width = 6;
  for (const auto &r : rows)
    width = std::max(width, r.name.size());
  out << fmt::format("{:<{}}  {:<6}  {}\n", "tensor", width, "kind", "max |diff| / max |ref|");
  for (const auto &r : rows) {
    std::string verdict = !r.compared ? r.note
                          : r.note.empty()
                              ? fmt::format("{:>9}  {}", num(r.rel), r.ok ? "ok" : "FAIL")
                              : fmt::format("{:>9}  FAIL ({})", num(r.rel), r.note);
    out << fmt::format("{:<{}}  {:<6}  {}\n", r.name, width, r.kind, verdict);
  }
}

std::string lossFailure(const LossRow &r, double rtol) {
  if (!r.nnsc)
    return fmt::format("first divergence at step {}: nnsc-run logged no loss", r.step);
  bool nnscFinite = std::isfinite(*r.nnsc), refFinite = std::isfinite(r.ref);
  if (!nnscFinite || !refFinite)
    return fmt::format("first divergence at step {}: loss {}, reference {}: not finite ({})",
                       r.step, lossText(*r.nnsc), lossText(r.ref),
                       !nnscFinite && !refFinite ? "both sides diverged; a smaller --lr?"
                       : !nnscFinite             ? "nnsc-run diverged"
                                                 : "the reference diverged");
  return fmt::format("first divergence at step {}: loss {:.8f}, reference {:.8f} (rel diff {} > "
                     "rtol {:g})",
                     r.step, *r.nnsc, r.ref, num(r.rel), rtol);
}

std::string verdict(const VerifyOptions &o, const Job &job, const std::vector<LossRow> &losses,
                    const std::vector<TensorRow> &tensors) {
  auto badLoss = std::find_if(losses.begin(), losses.end(), [](auto &r) { return !r.ok; });
  auto badTensor = std::find_if(tensors.begin(), tensors.end(), [](auto &r) { return !r.ok; });
  std::string tol = fmt::format("rtol {:g}", job.weightsRtol);
  if (badLoss == losses.end() && badTensor == tensors.end()) {
    int64_t compared =
        std::count_if(tensors.begin(), tensors.end(), [](auto &r) { return r.compared; });
    std::string lossTol = job.weightsRtol == o.rtol ? "" : fmt::format(" within rtol {:g}", o.rtol);
    return fmt::format("nnsc-verify: PASS: {} step{}{}, {} tensor{} within {}", losses.size(),
                       losses.size() == 1 ? "" : "s", lossTol, compared, compared == 1 ? "" : "s",
                       tol);
  }
  std::string tensorText;
  if (badTensor != tensors.end())
    tensorText =
        fmt::format("tensor '{}' differs by {} ({}){}", badTensor->name, num(badTensor->rel), tol,
                    badTensor->note.empty() ? "" : ": " + badTensor->note);
  if (badLoss == losses.end())
    return "nnsc-verify: FAIL: " + tensorText;
  std::string lossText = lossFailure(*badLoss, o.rtol);
  return "nnsc-verify: FAIL: " + lossText + (tensorText.empty() ? "" : "; first " + tensorText);
}

} // namespace

Expected<bool> compareAndReport(const VerifyOptions &o, const Job &job, const ReferenceRun &ref,
                                std::ostream &out) {
  auto nnscLosses = readLosses(job);
  if (!nnscLosses)
    return nnscLosses.status();
  auto losses = lossRows(*nnscLosses, ref, o.rtol);
  rt::MergeOptions m;
  m.input = job.runDir;
  for (const auto &e : ref.stateDict)
    if (skipped(e, job))
      m.exclude.insert(e.name);
  auto merged = rt::mergeCheckpoint(m);
  auto badLoss = std::find_if(losses.begin(), losses.end(), [](auto &r) { return !r.ok; });
  if (!merged && badLoss == losses.end())
    return merged.status().withContext("merging nnsc-run's final checkpoint");
  printHeader(o, job, out);
  printLosses(losses, out);
  if (!merged) {
    // The losses already fail (a diverged run's NaN replicas do not even
    // merge): report them, with why the tensors were not compared.
    out << fmt::format("nnsc-verify: FAIL: {}; tensors not compared (nnsc-run's final checkpoint "
                       "does not merge: {})\n",
                       lossFailure(*badLoss, o.rtol), merged.status().message());
    return false;
  }
  std::vector<TensorRow> tensors;
  for (const auto &e : ref.stateDict)
    tensors.push_back(tensorRow(e, merged->merged, job));
  printTensors(tensors, out);
  std::string line = verdict(o, job, losses, tensors);
  out << line << '\n';
  return line.find(": PASS:") != std::string::npos;
}

} // namespace nnsc::verify
