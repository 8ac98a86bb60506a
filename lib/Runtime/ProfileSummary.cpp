// The arithmetic of a profile (Profiler.h): totals, self times, the busy
// time of a device, the summary tables and the Chrome trace. No LibTorch.
#include "nnsc/Runtime/Profiler.h"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

namespace nnsc::rt {

namespace {

bool isHostOperator(const ProfiledEvent &e) { return !e.onDevice && !e.memory; }

// "nnsc::step#12" is a row of its own per step; the phase table counts them
// as one.
std::string phaseName(const std::string &name) {
  size_t hash = name.find('#');
  return hash == std::string::npos ? name : name.substr(0, hash);
}

std::vector<ProfileRow> sortedRows(std::map<std::string, ProfileRow> rows) {
  std::vector<ProfileRow> out;
  for (auto &[name, row] : rows)
    out.push_back(std::move(row));
  std::stable_sort(out.begin(), out.end(),
                   [](const ProfileRow &a, const ProfileRow &b) { return a.selfNs > b.selfNs; });
  return out;
}

// Host events' self times: on each thread, an event nested in another
// (starting inside it) is that one's child, and its duration leaves the
// parent's self time. Sorted by start, longer first, a stack of the open
// events finds each one's parent.
std::vector<int64_t> selfTimes(const std::vector<ProfiledEvent> &events) {
  std::vector<int64_t> self(events.size());
  std::map<uint64_t, std::vector<size_t>> byThread;
  for (size_t i = 0; i < events.size(); ++i) {
    self[i] = events[i].durationNs;
    if (isHostOperator(events[i]))
      byThread[events[i].thread].push_back(i);
  }
  for (auto &[thread, order] : byThread) {
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      if (events[a].startNs != events[b].startNs)
        return events[a].startNs < events[b].startNs;
      return events[a].durationNs > events[b].durationNs;
    });
    std::vector<size_t> open;
    for (size_t i : order) {
      while (!open.empty() &&
             events[open.back()].startNs + events[open.back()].durationNs <= events[i].startNs)
        open.pop_back();
      if (!open.empty())
        self[open.back()] -= events[i].durationNs;
      open.push_back(i);
    }
  }
  return self;
}

std::string clipped(const std::string &name, size_t width) {
  return name.size() <= width ? name : name.substr(0, width - 3) + "...";
}

double ms(int64_t ns) { return double(ns) / 1e6; }

void appendTable(std::string &out, const std::vector<ProfileRow> &rows, int64_t top, int64_t whole,
                 const char *what) {
  out += fmt::format("{:<56} {:>8} {:>11} {:>7} {:>11}\n", what, "calls", "self ms", "self %",
                     "total ms");
  int64_t shown = 0;
  for (const ProfileRow &r : rows) {
    if (shown++ == top)
      break;
    out += fmt::format("{:<56} {:>8} {:>11.3f} {:>6.1f}% {:>11.3f}\n", clipped(r.name, 56), r.calls,
                       ms(r.selfNs), whole > 0 ? 100.0 * double(r.selfNs) / double(whole) : 0.0,
                       ms(r.totalNs));
  }
  if (rows.size() > size_t(std::max<int64_t>(top, 0)))
    out += fmt::format("({} more names)\n", rows.size() - size_t(top));
}

std::string jsonString(const std::string &s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += fmt::format("\\{}", c);
    else if (static_cast<unsigned char>(c) < 0x20)
      out += fmt::format("\\u{:04x}", static_cast<unsigned char>(c));
    else
      out += c;
  }
  return out + "\"";
}

} // namespace

std::vector<ProfiledEvent> profiledSteps(std::vector<ProfiledEvent> events) {
  std::set<std::string> scopes;
  int64_t lastStepEnd = INT64_MIN;
  for (const ProfiledEvent &e : events)
    if (e.userScope && !e.onDevice) {
      scopes.insert(e.name);
      if (phaseName(e.name) == "nnsc::step")
        lastStepEnd = std::max(lastStepEnd, e.startNs + e.durationNs);
    }
  std::vector<ProfiledEvent> kept;
  for (ProfiledEvent &e : events) {
    if (e.onDevice ? scopes.count(e.name) > 0
                   : lastStepEnd != INT64_MIN && e.startNs >= lastStepEnd)
      continue;
    kept.push_back(std::move(e));
  }
  return kept;
}

std::vector<ProfileRow> summarizeEvents(const std::vector<ProfiledEvent> &events, bool device) {
  std::vector<int64_t> self = device ? std::vector<int64_t>() : selfTimes(events);
  std::map<std::string, ProfileRow> rows;
  for (size_t i = 0; i < events.size(); ++i) {
    const ProfiledEvent &e = events[i];
    if (device ? !e.onDevice : (!isHostOperator(e) || e.userScope))
      continue;
    ProfileRow &row = rows[e.name];
    row.name = e.name;
    row.calls += 1;
    row.totalNs += e.durationNs;
    row.selfNs += device ? e.durationNs : self[i];
  }
  return sortedRows(std::move(rows));
}

std::vector<ProfileRow> summarizePhases(const std::vector<ProfiledEvent> &events) {
  std::vector<int64_t> self = selfTimes(events);
  std::vector<ProfileRow> rows;
  for (size_t i = 0; i < events.size(); ++i) {
    if (!events[i].userScope || events[i].onDevice)
      continue;
    std::string name = phaseName(events[i].name);
    auto it =
        std::find_if(rows.begin(), rows.end(), [&](const ProfileRow &r) { return r.name == name; });
    if (it == rows.end())
      it = rows.insert(rows.end(), ProfileRow{name});
    it->calls += 1;
    it->totalNs += events[i].durationNs;
    it->selfNs += self[i];
  }
  return rows;
}

int64_t deviceBusyNs(const std::vector<ProfiledEvent> &events) {
  std::vector<std::pair<int64_t, int64_t>> spans;
  for (const ProfiledEvent &e : events)
    if (e.onDevice)
      spans.emplace_back(e.startNs, e.startNs + e.durationNs);
  std::sort(spans.begin(), spans.end());
  int64_t busy = 0, end = INT64_MIN;
  for (const auto &[a, b] : spans) {
    if (b <= end)
      continue;
    busy += b - std::max(a, end);
    end = b;
  }
  return busy;
}

std::string formatProfileSummary(const std::vector<ProfiledEvent> &events, int64_t steps,
                                 int64_t top) {
  std::string out;
  std::vector<ProfileRow> phases = summarizePhases(events);
  int64_t stepNs = 0;
  for (const ProfileRow &p : phases)
    if (p.name == "nnsc::step")
      stepNs = p.totalNs;
  out += fmt::format("{:<24} {:>8} {:>13} {:>9}\n", "phase", "calls", "ms per step", "of step");
  for (const ProfileRow &p : phases)
    out += fmt::format("{:<24} {:>8} {:>13.3f} {:>8.1f}%\n", p.name, p.calls,
                       ms(p.totalNs) / double(std::max<int64_t>(steps, 1)),
                       stepNs > 0 ? 100.0 * double(p.totalNs) / double(stepNs) : 0.0);
  std::vector<ProfileRow> host = summarizeEvents(events, false);
  int64_t hostSelf = 0;
  for (const ProfileRow &r : host)
    hostSelf += r.selfNs;
  out += "\n";
  appendTable(out, host, top, hostSelf, "host operator");
  std::vector<ProfileRow> device = summarizeEvents(events, true);
  if (device.empty())
    return out;
  int64_t deviceTotal = 0;
  for (const ProfileRow &r : device)
    deviceTotal += r.totalNs;
  out += "\n";
  appendTable(out, device, top, deviceTotal, "device kernel or copy");
  // The host runs ahead of the GPU: the window ends with the later of the
  // last step's host side and its last kernel.
  int64_t begin = INT64_MAX, end = INT64_MIN;
  for (const ProfiledEvent &e : events)
    if ((e.userScope && phaseName(e.name) == "nnsc::step") || e.onDevice) {
      begin = std::min(begin, e.userScope ? e.startNs : begin);
      end = std::max(end, e.startNs + e.durationNs);
    }
  int64_t window = begin < end ? end - begin : 0;
  int64_t busy = deviceBusyNs(events);
  out += fmt::format("device busy {:.3f} ms of the steps' {:.3f} ms ({:.1f}%)\n", ms(busy),
                     ms(window), window > 0 ? 100.0 * double(busy) / double(window) : 0.0);
  return out;
}

std::string chromeTrace(const std::vector<ProfiledEvent> &events, int rank) {
  int64_t origin = INT64_MAX;
  for (const ProfiledEvent &e : events)
    origin = std::min(origin, e.startNs);
  std::string out = "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n";
  bool first = true;
  for (const ProfiledEvent &e : events) {
    out += first ? "" : ",\n";
    first = false;
    const double ts = double(e.startNs - origin) / 1e3;
    const std::string pid = e.onDevice ? fmt::format("\"rank {} device {}\"", rank, e.deviceIndex)
                                       : fmt::format("\"rank {}\"", rank);
    if (e.memory) {
      out += fmt::format("{{\"name\": \"[memory]\", \"ph\": \"i\", \"s\": \"t\", \"ts\": {:.3f}, "
                         "\"pid\": {}, \"tid\": {}, \"args\": {{\"Bytes\": {}}}}}",
                         ts, pid, e.thread, e.bytes);
      continue;
    }
    const char *cat = e.onDevice ? "kernel" : e.userScope ? "user_annotation" : "cpu_op";
    std::string args = e.shapes.empty() ? "" : ", \"args\": {\"Input Dims\": " + e.shapes + "}";
    out +=
        fmt::format("{{\"name\": {}, \"cat\": \"{}\", \"ph\": \"X\", \"ts\": {:.3f}, "
                    "\"dur\": {:.3f}, \"pid\": {}, \"tid\": {}{}}}",
                    jsonString(e.name), cat, ts, double(e.durationNs) / 1e3, pid, e.thread, args);
  }
  return out + "\n]}\n";
}

} // namespace nnsc::rt
