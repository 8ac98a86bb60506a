// nnsc-plan --report: the plan as one self-contained HTML page (HtmlReport.h).
#include "nnsc/AutoDist/HtmlReport.h"

#include <algorithm>
#include <functional>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "Internal.h"
#include "Repeats.h"
#include "nnsc/Cost/OpCost.h"
#include "nnsc/Plan/Memory.h"
#include "nnsc/Plan/PlanPrinter.h"
#include "nnsc/Transform/Partition.h"
#include "nnsc/Transform/StepCost.h"

namespace nnsc::autodist {

namespace {

std::string escape(const std::string &text) {
  std::string out;
  for (char c : text) {
    switch (c) {
    case '&': out += "&amp;"; break;
    case '<': out += "&lt;"; break;
    case '>': out += "&gt;"; break;
    case '"': out += "&quot;"; break;
    default: out += c;
    }
  }
  return out;
}

std::string seconds(double s) { return formatSeconds(s); }

std::string shapeText(const ir::Shape &shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

// A colour per split identifier, the same on every page; replicas are grey.
std::string identColour(const std::string &ident) {
  static const char *palette[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2",
                                  "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#86bcb6"};
  if (ident.empty())
    return "#d3d3d3";
  size_t h = 0;
  for (char c : ident)
    h = h * 31 + static_cast<unsigned char>(c);
  return palette[h % (sizeof(palette) / sizeof(palette[0]))];
}

// One labelled segment of a stacked bar.
struct Segment {
  std::string label;
  std::string colour;
  double value = 0;
};

// Horizontal stacked bars, one row per device, scaled to the largest total,
// or to `limit` (a red line) when that is larger but within 4x of it; a
// limit further off is named in the legend instead of squashing the bars.
std::string stackedBars(const std::vector<std::string> &rows,
                        const std::vector<std::vector<Segment>> &segments, double limit,
                        const std::string &limitLabel,
                        const std::function<std::string(double)> &format) {
  const int labelWidth = 90, barWidth = 640, rowHeight = 26, legendHeight = 24;
  double scale = 0;
  for (const auto &row : segments) {
    double total = 0;
    for (const Segment &s : row)
      total += s.value;
    scale = std::max(scale, total);
  }
  std::string offScale;
  if (limit > 4 * scale && scale > 0) {
    offScale = fmt::format("{} {} (off the scale)", limitLabel, format(limit));
    limit = 0;
  }
  scale = std::max(scale, limit);
  if (scale <= 0)
    scale = 1;
  // Legend: every label that appears, wrapped to the picture's width.
  const int width = labelWidth + barWidth + 120, top = static_cast<int>(rows.size()) * rowHeight;
  std::string legend;
  int lx = labelWidth, ly = top + 10;
  auto place = [&](int itemWidth) {
    if (lx > labelWidth && lx + itemWidth > width) {
      lx = labelWidth;
      ly += legendHeight - 6;
    }
  };
  std::vector<std::string> seen;
  for (const auto &row : segments)
    for (const Segment &s : row) {
      if (s.value <= 0 || std::find(seen.begin(), seen.end(), s.label) != seen.end())
        continue;
      seen.push_back(s.label);
      int itemWidth = 30 + static_cast<int>(s.label.size()) * 7;
      place(itemWidth);
      legend += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"{}\"/>"
                            "<text x=\"{}\" y=\"{}\" class=\"lbl\">{}</text>\n",
                            lx, ly, s.colour, lx + 16, ly + 11, escape(s.label));
      lx += itemWidth;
    }
  if (limit > 0 || !offScale.empty()) {
    std::string text = offScale.empty() ? limitLabel : offScale;
    place(30 + static_cast<int>(text.size()) * 7);
    legend += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"#c00\" "
                          "stroke-width=\"2\"/><text x=\"{3}\" y=\"{4}\" class=\"lbl\">{5}</text>\n",
                          lx + 6, ly, ly + 12, lx + 12, ly + 11, escape(text));
  }
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" role=\"img\">\n",
      width, ly + legendHeight - 4);
  for (size_t r = 0; r < rows.size(); ++r) {
    int y = static_cast<int>(r) * rowHeight + 4;
    svg += fmt::format("<text x=\"0\" y=\"{}\" class=\"lbl\">{}</text>\n", y + 15, escape(rows[r]));
    double x = labelWidth, total = 0;
    for (const Segment &s : segments[r]) {
      if (s.value <= 0)
        continue;
      double w = barWidth * s.value / scale;
      svg += fmt::format("<rect x=\"{:.1f}\" y=\"{}\" width=\"{:.1f}\" height=\"18\" "
                         "fill=\"{}\"><title>{}: {}</title></rect>\n",
                         x, y + 2, w, s.colour, escape(s.label), escape(format(s.value)));
      x += w;
      total += s.value;
    }
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\" class=\"val\">{}</text>\n", x + 4, y + 15,
                       escape(format(total)));
  }
  if (limit > 0) {
    double x = labelWidth + barWidth * limit / scale;
    svg += fmt::format("<line x1=\"{0:.1f}\" y1=\"0\" x2=\"{0:.1f}\" y2=\"{1}\" stroke=\"#c00\" "
                       "stroke-width=\"2\"><title>{2}</title></line>\n",
                       x, top + 4, escape(limitLabel));
  }
  svg += legend;
  return svg + "</svg>\n";
}

// Seconds of one part's forward and backward (its recomputed forward
// included), as the step model prices them.
struct PartTime {
  double forward = 0;
  double backward = 0;
};

PartTime partTime(const cost::OpShapes &part, bool recomputed, const cost::DeviceSpec &device) {
  ir::DType dt = ir::DType::Float32;
  for (const cost::TensorInfo &t : part.outputs)
    if (ir::isFloatingPoint(t.dtype)) {
      dt = t.dtype;
      break;
    }
  cost::OpCost c = cost::opCost(part);
  PartTime t;
  t.forward = cost::workSeconds(c.forward, dt, device);
  t.backward = cost::workSeconds(c.backward, dt, device) + (recomputed ? t.forward : 0);
  return t;
}

// The layer a node belongs to: the repeated block's instance enclosing it,
// or "" outside every instance.
std::string layerOf(const ir::Node &node, const RepeatedBlocks &blocks) {
  for (const ir::ModuleFrame &f : node.moduleStack)
    if (f.cls == blocks.cls)
      return f.path;
  return "";
}

std::string splitText(const proto::NodePlan &np) {
  if (np.num() <= 1)
    return np.devices_size() > 1 ? "replica" : "whole";
  return fmt::format("{} / {}", np.ident(), np.num());
}

const char *kStyle = R"(<style>
body { font-family: system-ui, sans-serif; margin: 24px; color: #222; max-width: 1200px; }
h1 { font-size: 22px; } h2 { font-size: 18px; margin-top: 32px; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; font-size: 13px; margin: 8px 0; }
th, td { border: 1px solid #ccc; padding: 3px 7px; text-align: left; }
th { background: #f3f3f3; } tr.chosen td { background: #e8f4e8; font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.cell { text-align: center; color: #fff; font-size: 12px; min-width: 56px; }
td.off { background: #fff; }
.lbl { font-size: 12px; fill: #222; } .val { font-size: 12px; fill: #555; }
.note { color: #555; font-size: 13px; } code { background: #f3f3f3; padding: 0 3px; }
dl { display: grid; grid-template-columns: max-content auto; gap: 2px 16px; font-size: 14px; }
dt { color: #555; } dd { margin: 0; }
</style>
)";

} // namespace

Expected<std::string> htmlReport(const HtmlReportInput &in) {
  const ir::Graph &graph = *in.graph;
  const proto::Plan &plan = *in.plan;
  const cost::Cluster &cluster = *in.cluster;
  transform::PartitionOptions partition;
  partition.search.cache = std::make_shared<transform::RvdPlanCache>();
  if (cluster.comm)
    partition.search.cost = transform::tableRvdCost(cluster);
  auto pg = transform::partitionGraph(graph, plan, partition);
  if (!pg)
    return Status(pg.status()).withContext("error: the plan does not partition");
  cost::StepOptions stepOptions;
  stepOptions.memory = in.memory;
  stepOptions.microBatches = std::max(1, plan.micro_batches());
  auto steps = transform::estimateStep(graph, plan, *pg, cluster, stepOptions);
  if (!steps)
    return steps.status();
  cost::MemoryOptions memoryOptions = in.memory;
  std::vector<cost::DeviceMemory> memory = plan::estimateMemory(graph, plan, memoryOptions);
  std::vector<cost::StepInput> inputs = transform::stepInputs(graph, plan, *pg, memoryOptions);
  double limit = in.memLimit > 0 ? in.memLimit : cluster.device.memoryBytes;
  int dp = std::max(1, plan.runtime_ngpus() / std::max(1, plan.plan_ngpus()));

  std::ostringstream os;
  os << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
     << "<title>nnsc plan: " << escape(graph.name.empty() ? plan.graph() : graph.name)
     << "</title>\n"
     << kStyle << "</head>\n<body>\n";
  os << "<h1>nnsc plan report</h1>\n<dl>\n";
  auto item = [&os](const std::string &k, const std::string &v) {
    os << "<dt>" << escape(k) << "</dt><dd>" << escape(v) << "</dd>\n";
  };
  item("graph", plan.graph());
  item("policy", plan.policy());
  item("device", fmt::format("{} ({} per device, {} devices per node)", cluster.device.name,
                             plan::formatBytes(cluster.device.memoryBytes),
                             cluster.devicesPerNode));
  std::string shape =
      plan.stages_size() > 1
          ? fmt::format("{} pipeline stages ({} schedule) over {} devices", plan.stages_size(),
                        plan.schedule().empty() ? "1f1b" : plan.schedule(), plan.plan_ngpus())
          : fmt::format("{} device(s) per copy", plan.plan_ngpus());
  item("plan", fmt::format("{} x {} data-parallel copies = {} ranks; {} micro-batch(es); "
                           "ZeRO {}",
                           shape, dp, plan.runtime_ngpus(), stepOptions.microBatches,
                           plan.zero()));
  double slowest = 0, largest = 0;
  for (const cost::StepBreakdown &s : *steps)
    slowest = std::max(slowest, s.total());
  for (const cost::DeviceMemory &m : memory)
    largest = std::max(largest, m.total());
  item("predicted step", fmt::format("{} (slowest device)", seconds(slowest)));
  item("memory", fmt::format("{} on the largest device, limit {} ({:.1f}%)",
                             plan::formatBytes(largest), plan::formatBytes(limit),
                             100 * largest / limit));
  os << "</dl>\n";

  // autodist's configurations.
  if (in.search) {
    const Result &r = *in.search;
    os << "<h2>Configurations searched</h2>\n"
       << fmt::format("<p class=\"note\">{} configurations in {:.2f} s under a limit of {} per "
                      "device; compared by predicted time per sample.</p>\n",
                      r.trials.size(), r.totalSeconds, escape(plan::formatBytes(r.memLimit)));
    os << "<table>\n<tr><th>pp</th><th>tp</th><th>dp</th><th>micro</th><th>zero</th>"
          "<th>recompute</th><th>source</th><th>step</th><th>per sample</th><th>memory</th>"
          "<th>search</th><th>verdict</th></tr>\n";
    for (size_t i = 0; i < r.trials.size(); ++i) {
      const Trial &t = r.trials[i];
      os << (static_cast<int>(i) == r.chosen ? "<tr class=\"chosen\">" : "<tr>")
         << fmt::format("<td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}"
                        "</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">"
                        "{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>"
                        "<td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td></tr>\n",
                        t.stages, t.planNgpus, t.dp, t.microBatches, t.zero, t.recomputeLayers,
                        escape(t.source), t.stepSeconds > 0 ? seconds(t.stepSeconds) : "-",
                        t.secondsPerSample > 0 ? seconds(t.secondsPerSample) : "-",
                        t.memoryBytes > 0 ? plan::formatBytes(t.memoryBytes) : "-",
                        t.source == "search" ? fmt::format("{:.2f} s", t.searchSeconds) : "-",
                        escape(t.fits ? std::string(static_cast<int>(i) == r.chosen ? "chosen"
                                                                                     : "fits")
                                      : t.why));
    }
    os << "</table>\n";
    for (const std::string &note : r.notes)
      os << "<p class=\"note\">Because " << escape(note) << ".</p>\n";
  }

  // Time per device.
  os << "<h2>Predicted step per device</h2>\n"
     << fmt::format("<p class=\"note\">One step: {} micro-batch(es) of forward and backward, the "
                    "plan's collectives priced from the comm table, the gradient reductions "
                    "after what the last backward hides, and the optimizer update.</p>\n",
                    stepOptions.microBatches);
  std::vector<std::string> rows;
  std::vector<std::vector<Segment>> timeSegments;
  for (const cost::StepBreakdown &s : *steps) {
    double m = s.microBatches;
    std::vector<Segment> seg = {
        {"forward compute", "#4e79a7", m * s.forwardCompute},
        {"backward compute", "#a0cbe8", m * s.backwardCompute},
        {"forward comm", "#f28e2b", m * s.forwardComm},
        {"backward comm", "#ffbe7d", m * s.backwardComm}};
    if (s.scheduleSeconds > 0) {
      double inSchedule = m * (s.forwardCompute + s.backwardCompute + s.forwardComm +
                               s.backwardComm) + s.bubbleSeconds;
      seg.push_back({"pipeline wait", "#bab0ac", s.bubbleSeconds});
      seg.push_back({"stage transfers", "#9c755f", std::max(0.0, s.scheduleSeconds - inSchedule)});
    }
    seg.push_back({"exposed reduction", "#e15759", s.gradReduceExposed});
    seg.push_back({"optimizer", "#59a14f", s.optimizer});
    rows.push_back(fmt::format("device {}", s.device));
    timeSegments.push_back(seg);
  }
  os << stackedBars(rows, timeSegments, 0, "", seconds);
  os << "<table>\n<tr><th>device</th><th>forward</th><th>backward</th><th>forward comm</th>"
        "<th>backward comm</th><th>reduction (exposed)</th><th>optimizer</th><th>step</th></tr>\n";
  for (const cost::StepBreakdown &s : *steps)
    os << fmt::format("<tr><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>"
                      "<td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{} ({})"
                      "</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>\n",
                      s.device, seconds(s.forwardCompute), seconds(s.backwardCompute),
                      seconds(s.forwardComm), seconds(s.backwardComm), seconds(s.gradReduce),
                      seconds(s.gradReduceExposed), seconds(s.optimizer), seconds(s.total()));
  os << "</table>\n";

  // Memory per device.
  os << "<h2>Memory per device</h2>\n"
     << fmt::format("<p class=\"note\">Estimate with {} in {} precision, ZeRO {}; the red line "
                    "is the limit ({}).</p>\n",
                    cost::optimizerName(in.memory.optimizer),
                    cost::precisionName(in.memory.precision), plan.zero(),
                    escape(plan::formatBytes(limit)));
  rows.clear();
  std::vector<std::vector<Segment>> memorySegments;
  for (const cost::DeviceMemory &m : memory) {
    rows.push_back(fmt::format("device {}", m.device));
    memorySegments.push_back({{"parameters", "#4e79a7", m.paramBytes},
                              {"gradients", "#76b7b2", m.gradBytes},
                              {"optimizer state", "#59a14f", m.optimizerBytes},
                              {"activations", "#f28e2b", m.activationBytes},
                              {"backward transient", "#edc948", m.transientBytes}});
  }
  os << stackedBars(rows, memorySegments, limit, "limit", plan::formatBytes);

  // How each layer's ops are cut.
  RepeatedBlocks blocks = repeatedBlocks(graph);
  std::map<int64_t, const proto::NodePlan *> nodePlans;
  for (const proto::NodePlan &np : plan.nodes())
    nodePlans[np.node()] = &np;
  struct Section {
    std::string name;            // "" before the layers, a layer's path, "after"
    std::vector<int64_t> nodes;  // in graph order
    std::string signature;
    std::vector<std::string> alike; // later layers cut the same way
  };
  std::vector<Section> sections;
  for (const ir::Node &node : graph.nodes()) {
    if (!nodePlans.count(node.id))
      continue;
    std::string layer = blocks.cls.empty() ? "" : layerOf(node, blocks);
    // Outside the layers: before the first one, or after (a model without
    // repeated blocks is all "before").
    std::string name = layer;
    if (layer.empty())
      name = sections.empty() || sections.back().name == "before the layers" ? "before the layers"
                                                                              : "after the layers";
    if (sections.empty() || sections.back().name != name)
      sections.push_back({name, {}, "", {}});
    sections.back().nodes.push_back(node.id);
  }
  for (Section &s : sections)
    for (int64_t id : s.nodes) {
      const proto::NodePlan &np = *nodePlans[id];
      s.signature += fmt::format("{}:{}:{}:{}:", graph.nodes()[static_cast<size_t>(id)].op,
                                 np.ident(), np.num(), np.recompute_group() >= 0);
      for (int d : np.devices())
        s.signature += std::to_string(d) + ",";
      s.signature += ";";
    }
  // Fold each layer into the nearest earlier one cut the same way.
  std::vector<Section> shown;
  for (Section &s : sections) {
    bool layer = s.name != "before the layers" && s.name != "after the layers";
    if (layer && !shown.empty() && shown.back().signature == s.signature)
      shown.back().alike.push_back(s.name);
    else
      shown.push_back(s);
  }
  os << "<h2>How each layer is cut</h2>\n"
     << "<p class=\"note\">One row per op, one column per plan device: the part of the op the "
        "device computes (the split identifier of the op's annotation and the number of parts), "
        "a whole replica, or nothing. Colour follows the identifier; <b>R</b> marks ops "
        "recomputed in the backward. Layers cut the same way are shown once.</p>\n";
  for (const Section &s : shown) {
    os << "<h3>" << escape(blocks.cls.empty() ? std::string("every op") : s.name);
    if (!s.alike.empty())
      os << escape(fmt::format(" (and {} more layers cut alike: {} .. {})", s.alike.size(),
                               s.alike.front(), s.alike.back()));
    os << "</h3>\n<table>\n<tr><th>node</th><th>op</th><th>module</th><th>output</th>";
    for (int d = 0; d < plan.plan_ngpus(); ++d)
      os << "<th>dev " << d << "</th>";
    os << "</tr>\n";
    for (int64_t id : s.nodes) {
      const ir::Node &node = graph.nodes()[static_cast<size_t>(id)];
      const proto::NodePlan &np = *nodePlans[id];
      std::string out = node.outputs.empty()
                            ? "-"
                            : shapeText(graph.tensors()[static_cast<size_t>(node.outputs[0])].shape);
      os << fmt::format("<tr><td class=\"num\">{}</td><td>{}</td><td>{}</td><td>{}</td>", id,
                        escape(node.op), escape(node.modulePath), escape(out));
      for (int d = 0; d < plan.plan_ngpus(); ++d) {
        bool runs = std::find(np.devices().begin(), np.devices().end(), d) != np.devices().end();
        if (!runs) {
          os << "<td class=\"off\"></td>";
          continue;
        }
        os << fmt::format("<td class=\"cell\" style=\"background:{}{}\">{}{}</td>",
                          identColour(np.num() > 1 ? np.ident() : ""),
                          np.num() > 1 ? "" : ";color:#222", escape(splitText(np)),
                          np.recompute_group() >= 0 ? " R" : "");
      }
      os << "</tr>\n";
    }
    os << "</table>\n";
  }

  // The costliest ops of the slowest device.
  size_t worst = 0;
  for (size_t i = 0; i < steps->size(); ++i)
    if ((*steps)[i].total() > (*steps)[worst].total())
      worst = i;
  struct OpRow {
    const cost::OpShapes *part;
    PartTime time;
    bool recomputed;
  };
  std::vector<OpRow> ops;
  double compute = 0;
  if (worst < inputs.size()) {
    const cost::StepInput &si = inputs[worst];
    for (size_t i = 0; i < si.parts.size(); ++i) {
      bool rc = i < si.recomputed.size() && si.recomputed[i];
      OpRow row{&si.parts[i], partTime(si.parts[i], rc, cluster.device), rc};
      compute += row.time.forward + row.time.backward;
      ops.push_back(row);
    }
  }
  std::stable_sort(ops.begin(), ops.end(), [](const OpRow &a, const OpRow &b) {
    return a.time.forward + a.time.backward > b.time.forward + b.time.backward;
  });
  if (ops.size() > static_cast<size_t>(std::max(0, in.topOps)))
    ops.resize(static_cast<size_t>(std::max(0, in.topOps)));
  os << "<h2>Costliest ops</h2>\n"
     << fmt::format("<p class=\"note\">Device {} (the slowest): its {} costliest op parts by "
                    "forward plus backward compute (recomputed forwards included), of {} "
                    "compute a micro-batch.</p>\n",
                    worst < steps->size() ? (*steps)[worst].device : 0, ops.size(),
                    seconds(compute));
  os << "<table>\n<tr><th>node</th><th>op</th><th>module</th><th>split</th><th>local output"
        "</th><th>forward</th><th>backward</th><th>share</th></tr>\n";
  for (const OpRow &row : ops) {
    const ir::Node &node = *row.part->node;
    const proto::NodePlan *np = nodePlans.count(node.id) ? nodePlans[node.id] : nullptr;
    std::string out = row.part->outputs.empty() ? "-" : shapeText(row.part->outputs[0].shape);
    double t = row.time.forward + row.time.backward;
    os << fmt::format("<tr><td class=\"num\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
                      "<td class=\"num\">{}</td><td class=\"num\">{}{}</td><td class=\"num\">"
                      "{:.1f}%</td></tr>\n",
                      node.id, escape(node.op), escape(node.modulePath),
                      escape(np ? splitText(*np) : "-"), escape(out), seconds(row.time.forward),
                      seconds(row.time.backward), row.recomputed ? " (R)" : "",
                      compute > 0 ? 100 * t / compute : 0.0);
  }
  os << "</table>\n<p class=\"note\">Written by nnsc-plan --report.</p>\n</body>\n</html>\n";
  return os.str();
}

} // namespace nnsc::autodist
