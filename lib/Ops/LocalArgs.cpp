// Shape-carrying arguments rewritten for a device's local sub-tensors.
#include "nnsc/Ops/LocalArgs.h"

#include <functional>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace nnsc::ops {

namespace {

using Args = std::vector<ir::Argument>;

// What a rewrite sees: the node, its full and local shapes, and the
// arguments being rewritten.
struct Site {
  const ir::Graph &graph;
  const ir::Node &node;
  const LocalShapes &local;
  Args args;

  const ir::Shape &fullIn(size_t i) const { return graph.tensor(node.inputs[i]).shape; }
  const ir::Shape &fullOut(size_t i) const { return graph.tensor(node.outputs[i]).shape; }

  ir::Argument *find(std::string_view name) {
    for (ir::Argument &a : args)
      if (a.name == name)
        return &a;
    return nullptr;
  }
  std::optional<int64_t> intArg(std::string_view name) {
    ir::Argument *a = find(name);
    if (!a || !std::holds_alternative<int64_t>(a->value))
      return std::nullopt;
    return std::get<int64_t>(a->value);
  }
  /// Replaces an int-list argument `name`; absent or non-list: untouched.
  void setInts(std::string_view name, const ir::Shape &values) {
    if (ir::Argument *a = find(name); a && std::holds_alternative<std::vector<int64_t>>(a->value))
      a->value = values;
  }
  /// Replaces an int argument `name`; absent or None: untouched.
  void setInt(std::string_view name, int64_t value) {
    if (ir::Argument *a = find(name); a && std::holds_alternative<int64_t>(a->value))
      a->value = value;
  }
  Status error(const std::string &what) const {
    return errorf("error: {} at {}: {}", node.op, node.locString(), what);
  }
};

// The dim argument `name` of input 0, made non-negative; nullopt when out of
// range or when the node has no tensor input.
std::optional<size_t> dimArg(Site &s, std::string_view name) {
  if (s.node.inputs.empty())
    return std::nullopt;
  size_t rank = s.fullIn(0).size();
  int64_t d = s.intArg(name).value_or(0);
  if (d < 0)
    d += static_cast<int64_t>(rank);
  if (d < 0 || d >= static_cast<int64_t>(rank))
    return std::nullopt;
  return static_cast<size_t>(d);
}

bool partitioned(const Site &s, size_t input, size_t dim) {
  return s.local.inputs[input][dim] != s.fullIn(input)[dim];
}

Status sizeFromOutput(Site &s) {
  for (const char *name : {"size", "shape"})
    s.setInts(name, s.local.outputs[0]);
  return Status::ok();
}

Status splitSizes(Site &s) {
  auto d = dimArg(s, "dim");
  if (!d || !partitioned(s, 0, *d))
    return Status::ok();
  ir::Shape sizes;
  for (const ir::Shape &out : s.local.outputs)
    sizes.push_back(out.at(*d));
  if (s.intArg("split_size")) {
    for (size_t i = 0; i + 1 < sizes.size(); ++i)
      if (sizes[i] != sizes[0])
        return s.error(fmt::format("local pieces of sizes [{}] along dim {} are not an equal "
                                   "split",
                                   fmt::join(sizes, ", "), *d));
    s.setInt("split_size", sizes[0]);
  }
  s.setInts("split_size", sizes); // the int[] overload
  s.setInts("split_sizes", sizes);
  return Status::ok();
}

// slice / narrow keep a partitioned dim only when they take it whole (their
// annotation freezes a dim they cut); locally that is the whole local dim.
Status wholeRange(Site &s, bool narrow) {
  auto d = dimArg(s, "dim");
  if (!d || !partitioned(s, 0, *d))
    return Status::ok();
  if (s.fullOut(0)[*d] != s.fullIn(0)[*d])
    return s.error(fmt::format("dim {} is partitioned ({} of {}) but the op cuts [{}] out of it; "
                               "local bounds would depend on the device's offset",
                               *d, s.local.inputs[0][*d], s.fullIn(0)[*d], s.fullOut(0)[*d]));
  int64_t n = s.local.inputs[0][*d];
  s.setInt("start", 0);
  s.setInt(narrow ? "length" : "end", n);
  return Status::ok();
}

Status unflattenSizes(Site &s) {
  auto d = dimArg(s, "dim");
  ir::Argument *sizes = s.find("sizes");
  if (!d || !sizes || !std::holds_alternative<std::vector<int64_t>>(sizes->value))
    return Status::ok();
  size_t n = std::get<std::vector<int64_t>>(sizes->value).size();
  const ir::Shape &out = s.local.outputs[0];
  if (*d + n > out.size())
    return s.error(
        fmt::format("{} sizes at dim {} do not fit the output's {} dims", n, *d, out.size()));
  s.setInts("sizes", ir::Shape(out.begin() + static_cast<long>(*d),
                               out.begin() + static_cast<long>(*d + n)));
  return Status::ok();
}

double numberOf(const ir::ArgValue &v, double fallback) {
  if (const auto *i = std::get_if<int64_t>(&v))
    return static_cast<double>(*i);
  if (const auto *f = std::get_if<double>(&v))
    return *f;
  return fallback;
}

// arange's values are start, start+step, ...: a shorter local range keeps the
// first values (creation ops are never split by their annotation; this only
// keeps a shrunk output consistent).
Status arangeEnd(Site &s) {
  const ir::Shape &out = s.local.outputs[0];
  if (out.size() != 1 || out == s.fullOut(0))
    return Status::ok();
  ir::Argument *end = s.find("end");
  ir::Argument *start = s.find("start");
  ir::Argument *step = s.find("step");
  if (!end)
    return Status::ok();
  bool ints = std::holds_alternative<int64_t>(end->value) &&
              (!start || std::holds_alternative<int64_t>(start->value)) &&
              (!step || std::holds_alternative<int64_t>(step->value));
  double first = start ? numberOf(start->value, 0) : 0, by = step ? numberOf(step->value, 1) : 1;
  double last = first + static_cast<double>(out[0]) * by;
  if (ints)
    end->value = static_cast<int64_t>(last);
  else
    end->value = last;
  return Status::ok();
}

// repeat's repeats stay: split dims are the ones repeated once.
Status checkRepeat(Site &s) {
  ir::Argument *a = s.find("repeats");
  if (s.node.inputs.empty() || !a || !std::holds_alternative<std::vector<int64_t>>(a->value))
    return Status::ok();
  const auto &repeats = std::get<std::vector<int64_t>>(a->value);
  const ir::Shape &in = s.local.inputs[0], &out = s.local.outputs[0];
  if (repeats.size() != out.size() || in.size() > out.size())
    return s.error("repeats do not match the output's dims");
  size_t lead = out.size() - in.size();
  for (size_t d = 0; d < out.size(); ++d) {
    int64_t base = d < lead ? 1 : in[d - lead];
    if (base * repeats[d] != out[d])
      return s.error(fmt::format("local output [{}] is not local input [{}] repeated [{}]",
                                 fmt::join(out, ", "), fmt::join(in, ", "),
                                 fmt::join(repeats, ", ")));
  }
  return Status::ok();
}

// slice_scatter writes src into a range of `dim`; that dim is split only when
// the range is all of it, which is locally all of the local dim.
Status scatterRange(Site &s) {
  auto d = dimArg(s, "dim");
  if (!d || !partitioned(s, 0, *d))
    return Status::ok();
  if (s.fullIn(1)[*d] != s.fullIn(0)[*d])
    return s.error(fmt::format("dim {} is partitioned but src covers [{}] of its {}", *d,
                               s.fullIn(1)[*d], s.fullIn(0)[*d]));
  s.setInt("start", 0);
  s.setInt("end", s.local.inputs[0][*d]);
  return Status::ok();
}

// group_norm's groups of C / G channels split whole: a part holds local C / (C / G)
// of them. native_group_norm also spells out N and C.
Status groupCount(Site &s) {
  bool native = s.node.op == "aten::native_group_norm";
  const char *name = native ? "group" : "num_groups";
  auto groups = s.intArg(name);
  const ir::Shape &full = s.fullIn(0), &local = s.local.inputs[0];
  if (!groups || *groups < 1 || full.size() < 2 || full[1] % *groups != 0)
    return Status::ok();
  int64_t perGroup = full[1] / *groups;
  if (local[1] % perGroup != 0)
    return s.error(fmt::format("{} local channels are not whole groups of {}", local[1],
                               perGroup));
  s.setInt(name, local[1] / perGroup);
  if (native) {
    s.setInt("N", local[0]);
    s.setInt("C", local[1]);
  }
  return Status::ok();
}

using Rewrite = std::function<Status(Site &)>;

const std::map<std::string, Rewrite> &rewrites() {
  static const std::map<std::string, Rewrite> table = [] {
    std::map<std::string, Rewrite> t;
    for (const char *op : {"view", "reshape", "_unsafe_view", "expand", "broadcast_to", "zeros",
                           "ones", "full", "empty", "rand", "randn", "randint", "empty_strided",
                           "new_zeros", "new_ones", "new_full", "new_empty"})
      t[std::string("aten::") + op] = sizeFromOutput;
    for (const char *op :
         {"split", "unsafe_split", "split_with_sizes", "unsafe_split_with_sizes", "split_copy"})
      t[std::string("aten::") + op] = splitSizes;
    t["aten::slice"] = [](Site &s) { return wholeRange(s, false); };
    t["aten::narrow"] = [](Site &s) { return wholeRange(s, true); };
    t["aten::narrow_copy"] = [](Site &s) { return wholeRange(s, true); };
    t["aten::unflatten"] = unflattenSizes;
    t["aten::arange"] = arangeEnd;
    t["aten::repeat"] = checkRepeat;
    t["aten::slice_scatter"] = scatterRange;
    t["aten::group_norm"] = groupCount;
    t["aten::native_group_norm"] = groupCount;
    return t;
  }();
  return table;
}

Status checkCounts(const ir::Graph &graph, const ir::Node &node, const LocalShapes &local) {
  bool ok =
      local.inputs.size() == node.inputs.size() && local.outputs.size() == node.outputs.size();
  for (size_t i = 0; ok && i < node.inputs.size(); ++i)
    ok = local.inputs[i].size() == graph.tensor(node.inputs[i]).shape.size();
  for (size_t i = 0; ok && i < node.outputs.size(); ++i)
    ok = local.outputs[i].size() == graph.tensor(node.outputs[i]).shape.size();
  if (ok)
    return Status::ok();
  return Status::internal(fmt::format("error: {} at {}: local shapes ({} inputs, {} outputs) do "
                                      "not match the node's {} inputs and {} outputs dim for dim",
                                      node.op, node.locString(), local.inputs.size(),
                                      local.outputs.size(), node.inputs.size(),
                                      node.outputs.size()));
}

bool allWhole(const ir::Graph &graph, const ir::Node &node, const LocalShapes &local) {
  for (size_t i = 0; i < node.inputs.size(); ++i)
    if (local.inputs[i] != graph.tensor(node.inputs[i]).shape)
      return false;
  for (size_t i = 0; i < node.outputs.size(); ++i)
    if (local.outputs[i] != graph.tensor(node.outputs[i]).shape)
      return false;
  return true;
}

} // namespace

Expected<std::vector<ir::Argument>> localizeArgs(const ir::Graph &graph, const ir::Node &node,
                                                 const LocalShapes &local) {
  NNSC_RETURN_IF_ERROR(checkCounts(graph, node, local));
  auto it = rewrites().find(node.op);
  if (it == rewrites().end() || allWhole(graph, node, local))
    return node.args;
  if (node.outputs.empty())
    return node.args;
  Site site{graph, node, local, node.args};
  NNSC_RETURN_IF_ERROR(it->second(site));
  return std::move(site.args);
}

} // namespace nnsc::ops
