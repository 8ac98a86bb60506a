// The profile's arithmetic on hand-made events (self times, phases, the
// device's busy time, the trace's JSON), and StepProfiler around real
// LibTorch work: the files it writes and what they hold.
#include "../CatchCompat.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <unistd.h>

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <nlohmann/json.hpp>

#include "nnsc/Runtime/Profiler.h"

using namespace nnsc::rt;
namespace fs = std::filesystem;

namespace {

ProfiledEvent host(const std::string &name, int64_t start, int64_t duration, uint64_t thread = 1) {
  ProfiledEvent e;
  e.name = name;
  e.startNs = start;
  e.durationNs = duration;
  e.thread = thread;
  return e;
}

ProfiledEvent scope(const std::string &name, int64_t start, int64_t duration) {
  ProfiledEvent e = host(name, start, duration);
  e.userScope = true;
  return e;
}

ProfiledEvent kernel(const std::string &name, int64_t start, int64_t duration, uint64_t stream) {
  ProfiledEvent e = host(name, start, duration, stream);
  e.onDevice = true;
  e.deviceIndex = 0;
  return e;
}

const ProfileRow &row(const std::vector<ProfileRow> &rows, const std::string &name) {
  for (const ProfileRow &r : rows)
    if (r.name == name)
      return r;
  FAIL("no row " << name);
  return rows.front();
}

std::string readText(const fs::path &p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

} // namespace

TEST_CASE("profile: self time leaves out the operators nested inside", "[runtime][profile]") {
  // linear [0, 100) calls addmm [10, 70), which calls mm-like work [20, 50);
  // on another thread an addmm [5, 25) overlaps in time but is no child.
  std::vector<ProfiledEvent> events{scope("nnsc::step#1", 0, 120), host("aten::linear", 0, 100),
                                    host("aten::addmm", 10, 60),   host("aten::copy_", 20, 30),
                                    host("aten::add", 100, 10),    host("aten::addmm", 5, 20, 2)};
  std::vector<ProfileRow> rows = summarizeEvents(events, false);
  REQUIRE(rows.size() == 4); // the scope is a phase, not an operator
  CHECK(row(rows, "aten::linear").selfNs == 40);
  CHECK(row(rows, "aten::linear").totalNs == 100);
  CHECK(row(rows, "aten::addmm").calls == 2);
  CHECK(row(rows, "aten::addmm").selfNs == 30 + 20);
  CHECK(row(rows, "aten::addmm").totalNs == 80);
  CHECK(row(rows, "aten::copy_").selfNs == 30);
  CHECK(rows.front().name == "aten::addmm"); // largest self time first
  CHECK(rows.back().name == "aten::add");
}

TEST_CASE("profile: phases per step and the device's busy time", "[runtime][profile]") {
  std::vector<ProfiledEvent> events{
      scope("nnsc::step#3", 0, 1000),      scope("nnsc::forward", 0, 300),
      scope("nnsc::backward", 300, 500),   scope("nnsc::step#4", 1000, 1000),
      scope("nnsc::forward", 1000, 200),   kernel("gemm", 50, 100, 7),
      kernel("gemm", 120, 100, 7),         kernel("nccl:all_reduce", 400, 250, 9),
      kernel("elementwise", 1500, 700, 7), host("aten::mm", 10, 20)};
  std::vector<ProfileRow> phases = summarizePhases(events);
  REQUIRE(phases.size() == 3);
  CHECK(phases[0].name == "nnsc::step");
  CHECK(phases[0].calls == 2);
  CHECK(phases[0].totalNs == 2000);
  CHECK(phases[1].name == "nnsc::forward");
  CHECK(phases[1].totalNs == 500);
  CHECK(phases[2].name == "nnsc::backward");
  // [50, 220) ∪ [400, 650) ∪ [1500, 2200): overlapping kernels count once.
  CHECK(deviceBusyNs(events) == 170 + 250 + 700);
  std::vector<ProfileRow> kernels = summarizeEvents(events, true);
  REQUIRE(kernels.size() == 3);
  CHECK(kernels[0].name == "elementwise");
  CHECK(row(kernels, "gemm").calls == 2);
  CHECK(row(kernels, "gemm").selfNs == 200);
  std::string text = formatProfileSummary(events, 2, 10);
  // The window ends with the last kernel (2200), after the last step's host
  // side (2000): 1120 of 2200 ns.
  CHECK_THAT(text,
             Catch::Matchers::ContainsSubstring("device busy 0.001 ms of the steps' 0.002 ms"));
  CHECK_THAT(text, Catch::Matchers::ContainsSubstring("(50.9%)"));
  CHECK_THAT(text, Catch::Matchers::ContainsSubstring("nnsc::forward"));
}

TEST_CASE("profile: the steps' events leave out the profiler's own", "[runtime][profile]") {
  ProfiledEvent annotation = kernel("nnsc::step#2", 100, 900, 7); // Kineto's GPU copy
  std::vector<ProfiledEvent> events{
      scope("nnsc::step#2", 0, 1000),     host("aten::mm", 10, 20),
      scope("gloo:all_reduce", 300, 50),  annotation,
      kernel("gemm", 100, 40, 7),         kernel("gloo:all_reduce", 320, 20, 8),
      kernel("late kernel", 1100, 50, 7), host("cudaDeviceSynchronize", 1000, 200)};
  std::vector<ProfiledEvent> kept = profiledSteps(events);
  std::vector<std::string> names;
  for (const ProfiledEvent &e : kept)
    names.push_back(e.name + (e.onDevice ? " (device)" : ""));
  CHECK(names == std::vector<std::string>{"nnsc::step#2", "aten::mm", "gloo:all_reduce",
                                          "gemm (device)", "late kernel (device)"});
  CHECK(deviceBusyNs(kept) == 90);
}

TEST_CASE("profile: the Chrome trace is JSON with every event", "[runtime][profile]") {
  ProfiledEvent alloc = host("[memory]", 40, 0);
  alloc.memory = true;
  alloc.bytes = 4096;
  ProfiledEvent quoted = host("odd \"name\"\\", 30, 5);
  quoted.shapes = "[[2, 3], []]";
  std::vector<ProfiledEvent> events{scope("nnsc::step#1", 1000, 500), quoted, alloc,
                                    kernel("gemm", 1100, 50, 7)};
  nlohmann::json j = nlohmann::json::parse(chromeTrace(events, 3));
  const auto &list = j.at("traceEvents");
  REQUIRE(list.size() == 4);
  CHECK(list[0].at("name") == "nnsc::step#1");
  CHECK(list[0].at("cat") == "user_annotation");
  CHECK(list[0].at("ts").get<double>() == Approx(0.97)); // µs from the first event
  CHECK(list[0].at("dur").get<double>() == Approx(0.5));
  CHECK(list[0].at("pid") == "rank 3");
  CHECK(list[1].at("name") == "odd \"name\"\\");
  CHECK(list[1].at("args").at("Input Dims") == nlohmann::json::parse("[[2, 3], []]"));
  CHECK(list[2].at("ph") == "i");
  CHECK(list[2].at("args").at("Bytes") == 4096);
  CHECK(list[3].at("pid") == "rank 3 device 0");
  CHECK(list[3].at("tid") == 7);
}

TEST_CASE("profile: StepProfiler records the profiled steps only", "[runtime][profile]") {
  fs::path dir = fs::temp_directory_path() / ("nnsc-profile-" + std::to_string(getpid()));
  fs::remove_all(dir);
  ProfileConfig config;
  config.startStep = 2;
  config.endStep = 3;
  config.ranks = {1};
  config.dir = dir.string();
  config.recordShapes = "true";
  config.memory = "true";
  std::ostringstream out, other;
  {
    StepProfiler profiler(config, 1, -1), notProfiled(config, 0, -1);
    for (int64_t step = 1; step <= 4; ++step) {
      profiler.beforeStep(step);
      notProfiled.beforeStep(step);
      CHECK(profiler.recording() == (step == 2 || step == 3));
      CHECK(!notProfiled.recording());
      {
        RECORD_USER_SCOPE("nnsc::step#" + std::to_string(step));
        at::Tensor a = at::ones({16, 8});
        at::Tensor b = step == 1 ? a.add(1) : a.mm(a.t()); // step 1 is not profiled
        (void)b.sum();
      }
      profiler.afterStep(step);
      notProfiled.afterStep(step);
      (void)at::ones({4}).neg(); // a validation: at step 3 after the stop
      auto wrote = profiler.write(&out);
      REQUIRE(wrote.isOk());
      CHECK(*wrote == (step == 3));
      auto none = notProfiled.write(&other);
      REQUIRE(none.isOk());
      CHECK(!*none);
    }
  }
  CHECK(other.str().empty());
  CHECK(!fs::exists(dir / "rank0.pt.trace.json"));
  REQUIRE(fs::exists(dir / "rank1.pt.trace.json"));
  nlohmann::json trace = nlohmann::json::parse(readText(dir / "rank1.pt.trace.json"));
  std::map<std::string, int> names;
  bool mmShapes = false;
  int64_t allocated = 0;
  for (const auto &e : trace.at("traceEvents")) {
    if (!e.contains("name"))
      continue;
    names[e.at("name").get<std::string>()] += 1;
    if (e.at("name") == "[memory]")
      allocated += std::max<int64_t>(0, e.at("args").at("Bytes").get<int64_t>());
    if (e.at("name") == "aten::mm" && e.contains("args") && e.at("args").contains("Input Dims"))
      mmShapes = e.at("args").at("Input Dims") == nlohmann::json::parse("[[16, 8], [8, 16]]");
  }
  CHECK(names["nnsc::step#2"] == 1);
  CHECK(names["nnsc::step#3"] == 1);
  CHECK(names.count("nnsc::step#1") == 0);
  CHECK(names.count("nnsc::step#4") == 0);
  CHECK(names.count("aten::add") == 0);
  CHECK(names["aten::neg"] == 1); // between steps 2 and 3; step 3's came after the stop
  CHECK(names["aten::mm"] == 2);
  CHECK(mmShapes);
  CHECK(allocated >= 2 * 16 * 16 * 4); // the two products, at least
  std::string summary = readText(dir / "rank1.summary.txt");
  CHECK(summary == out.str());
  CHECK_THAT(summary, Catch::Matchers::StartsWith("profile of rank 1, steps 2-3: "));
  CHECK_THAT(summary, Catch::Matchers::ContainsSubstring("nnsc::step                      2"));
  CHECK_THAT(summary, Catch::Matchers::ContainsSubstring("aten::mm"));
  fs::remove_all(dir);
}
