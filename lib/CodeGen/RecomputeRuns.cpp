// Recompute runs of a rank program (RecomputeRuns.h): finding them among the
// steps, and moving their statements into functions of their own.
#include "RecomputeRuns.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace nnsc::codegen {

std::string RecomputeRun::functionName() const {
  return index == 0 ? fmt::format("recompute_{}", group)
                    : fmt::format("recompute_{}_{}", group, index);
}

namespace {

// The group of the nearest node step from `i` in direction `dir`, skipping
// adapters; -1 at a state write or the program's end.
int nearestNodeGroup(const std::vector<RankStep> &steps, size_t i, int dir) {
  for (long j = long(i) + dir; j >= 0 && j < long(steps.size()); j += dir) {
    const RankStep &s = steps[static_cast<size_t>(j)];
    if (s.kind == RankStep::Node)
      return s.recomputeGroup;
    if (s.kind == RankStep::StateWrite)
      return -1;
  }
  return -1;
}

} // namespace

std::vector<RecomputeRun> findRecomputeRuns(const RankLayout &layout) {
  const std::vector<RankStep> &steps = layout.steps;
  std::vector<int> group(steps.size(), -1);
  for (size_t i = 0; i < steps.size(); ++i) {
    if (steps[i].kind == RankStep::Node)
      group[i] = steps[i].recomputeGroup;
    else if (steps[i].kind == RankStep::Adapter) {
      int before = nearestNodeGroup(steps, i, -1);
      group[i] = before >= 0 && before == nearestNodeGroup(steps, i, +1) ? before : -1;
    }
  }
  std::vector<RecomputeRun> runs;
  std::map<int, int> seen; // group -> runs so far
  for (size_t i = 0; i < steps.size();) {
    if (group[i] < 0) {
      ++i;
      continue;
    }
    RecomputeRun run;
    run.group = group[i];
    run.index = seen[run.group]++;
    run.begin = i;
    while (i < steps.size() && group[i] == run.group)
      ++i;
    run.end = i;
    runs.push_back(run);
  }
  return runs;
}

namespace {

// The variables one step assigns and reads, from its statements' text:
// `name = ...` assigns name; every other identifier that is not an attribute
// (torch.linear), a keyword argument (dim=1), inside a string or a comment is
// read. Callers keep only the names that are program variables.
struct StepNames {
  std::vector<std::string> assigns;
  std::vector<std::string> reads; // first-read order, unique
};

void scanExpression(const std::string &text, size_t from, StepNames &out) {
  for (size_t i = from; i < text.size();) {
    char c = text[i];
    if (c == '#')
      break;
    if (c == '\'' || c == '"') { // skip a string literal
      for (++i; i < text.size() && text[i] != c; ++i)
        i += text[i] == '\\' ? 1 : 0;
      ++i;
      continue;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) { // a number, 1e-05 included
      while (i < text.size() &&
             (std::isalnum(static_cast<unsigned char>(text[i])) || text[i] == '.' ||
              text[i] == '_' ||
              ((text[i] == '-' || text[i] == '+') && (text[i - 1] == 'e' || text[i - 1] == 'E'))))
        ++i;
      continue;
    }
    if (!std::isalpha(static_cast<unsigned char>(c)) && c != '_') {
      ++i;
      continue;
    }
    size_t start = i;
    while (i < text.size() && (std::isalnum(static_cast<unsigned char>(text[i])) || text[i] == '_'))
      ++i;
    bool attribute = start > 0 && text[start - 1] == '.';
    bool keyword =
        i < text.size() && text[i] == '=' && (i + 1 >= text.size() || text[i + 1] != '=');
    std::string name = text.substr(start, i - start);
    if (!attribute && !keyword &&
        std::find(out.reads.begin(), out.reads.end(), name) == out.reads.end())
      out.reads.push_back(name);
  }
}

StepNames scanStep(const std::string &text) {
  StepNames names;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    size_t first = line.find_first_not_of(' ');
    if (first == std::string::npos || line[first] == '#')
      continue;
    size_t eq = line.find(" = ", first);
    bool assigns = eq != std::string::npos &&
                   std::all_of(line.begin() + long(first), line.begin() + long(eq), [](char c) {
                     return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
                   });
    if (assigns) {
      names.assigns.push_back(line.substr(first, eq - first));
      scanExpression(line, eq + 3, names);
    } else {
      scanExpression(line, first, names);
    }
  }
  return names;
}

std::string callText(const RecomputeRun &run, const std::vector<std::string> &inputs,
                     const std::vector<std::string> &outputs, const RankLayout &layout) {
  std::string result = run.index == 0 ? fmt::format("rc{}", run.group)
                                      : fmt::format("rc{}_{}", run.group, run.index);
  std::string what = static_cast<size_t>(run.group) < layout.recomputeGroups.size()
                         ? layout.recomputeGroups[static_cast<size_t>(run.group)]
                         : "";
  std::string out = fmt::format("\n    # recompute group {}: {} - {} keeps only its inputs and "
                                "runs again in backward\n",
                                run.group, what, run.functionName());
  out += fmt::format("    {} = nnsc.recompute(\"{}\", [{}], device)\n", result, run.functionName(),
                     fmt::join(inputs, ", "));
  for (size_t i = 0; i < outputs.size(); ++i)
    out += fmt::format("    {} = {}[{}]\n", outputs[i], result, i);
  return out + "\n";
}

std::string functionText(const RecomputeRun &run, const std::vector<std::string> &inputs,
                         const std::vector<std::string> &outputs, const std::string &body,
                         const RankLayout &layout) {
  std::string what = static_cast<size_t>(run.group) < layout.recomputeGroups.size()
                         ? layout.recomputeGroups[static_cast<size_t>(run.group)]
                         : "";
  std::string out = fmt::format("\n\n# recompute group {}: {}{}\ndef {}(\n", run.group, what,
                                run.index > 0 ? fmt::format(" (part {})", run.index + 1) : "",
                                run.functionName());
  for (const std::string &in : inputs)
    out += fmt::format("    {}: Tensor,\n", in);
  out += "    device: Device,\n) -> List[Tensor]:\n" + body;
  return out + fmt::format("    return [{}]\n", fmt::join(outputs, ", "));
}

} // namespace

Expected<std::string> assembleRecompute(const ProgramPieces &pieces,
                                        const std::vector<RecomputeRun> &runs,
                                        const RankLayout &layout,
                                        std::map<std::string, std::string> *soleReader) {
  if (runs.empty()) {
    std::string all = pieces.head;
    for (const std::string &s : pieces.steps)
      all += s;
    return all + pieces.tail;
  }
  std::vector<StepNames> names;
  std::map<std::string, size_t> lastRead; // variable -> last step reading it (tail: size)
  for (size_t i = 0; i < pieces.steps.size(); ++i) {
    names.push_back(scanStep(pieces.steps[i]));
    for (const std::string &r : names.back().reads)
      lastRead[r] = i;
  }
  for (const std::string &r : scanStep(pieces.tail).reads)
    lastRead[r] = pieces.steps.size();

  std::set<std::string> defined(pieces.params.begin(), pieces.params.end());
  std::string main = pieces.head, functions;
  // Who reads each variable: the functions by name, "" for a statement that
  // stays in forward (ZeRO-3 gathers a function's sole inputs around it).
  std::map<std::string, std::set<std::string>> readers;
  auto readInForward = [&](size_t step) {
    for (const std::string &r : names[step].reads)
      readers[r].insert("");
  };
  size_t next = 0;
  for (const RecomputeRun &run : runs) {
    for (; next < run.begin; ++next) {
      main += pieces.steps[next];
      readInForward(next);
      defined.insert(names[next].assigns.begin(), names[next].assigns.end());
    }
    std::set<std::string> inner;
    std::vector<std::string> inputs, outputs;
    std::string body;
    for (size_t i = run.begin; i < run.end; ++i) {
      for (const std::string &r : names[i].reads)
        if (!inner.count(r) && defined.count(r) &&
            std::find(inputs.begin(), inputs.end(), r) == inputs.end())
          inputs.push_back(r);
      inner.insert(names[i].assigns.begin(), names[i].assigns.end());
      body += pieces.steps[i];
    }
    for (size_t i = run.begin; i < run.end; ++i)
      for (const std::string &a : names[i].assigns)
        if (auto it = lastRead.find(a); it != lastRead.end() && it->second >= run.end)
          outputs.push_back(a);
    for (const std::string &in : inputs)
      if (in.size() > 1 && in[0] == 'r' && std::isdigit(static_cast<unsigned char>(in[1])))
        return Status::internal(fmt::format("error: {} would read the list {} of an earlier "
                                            "statement; only tensors cross a recompute boundary",
                                            run.functionName(), in));
    if (outputs.empty()) { // nothing reads it: no function
      main += body;
      for (size_t i = run.begin; i < run.end; ++i)
        readInForward(i);
    } else {
      main += callText(run, inputs, outputs, layout);
      functions += functionText(run, inputs, outputs, body, layout);
      for (const std::string &in : inputs)
        readers[in].insert(run.functionName());
    }
    defined.insert(inner.begin(), inner.end());
    next = run.end;
  }
  for (; next < pieces.steps.size(); ++next) {
    main += pieces.steps[next];
    readInForward(next);
  }
  for (const std::string &r : scanStep(pieces.tail).reads)
    readers[r].insert("");
  if (soleReader)
    for (const auto &[var, who] : readers)
      if (who.size() == 1 && !who.begin()->empty())
        (*soleReader)[var] = *who.begin();
  // Calls in a row: one blank line between them, not two.
  for (size_t at; (at = main.find("\n\n\n")) != std::string::npos;)
    main.erase(at, 1);
  return main + pieces.tail + functions;
}

} // namespace nnsc::codegen
