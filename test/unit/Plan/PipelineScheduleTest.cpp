// Pipeline schedules: the known orders, every pass exactly once, and no
// deadlock under blocking receives for a range of shapes.
#include "../CatchCompat.h"

#include "nnsc/Plan/Pipeline.h"
#include "nnsc/Plan/PipelineSchedule.h"

using namespace nnsc;
using namespace nnsc::plan;

namespace {

std::string text(const std::vector<PipelinePass> &passes) {
  std::string out;
  for (const PipelinePass &p : passes)
    out += (out.empty() ? "" : " ") + std::string(p.forward ? "F" : "B") + std::to_string(p.micro) +
           (p.chunk ? "c" + std::to_string(p.chunk) : "");
  return out;
}

std::vector<std::vector<PipelinePass>> all(const std::string &schedule, int stages, int chunks,
                                           int micro) {
  std::vector<std::vector<PipelinePass>> out;
  for (int s = 0; s < stages; ++s)
    out.push_back(*pipelinePasses(schedule, stages, chunks, micro, s));
  return out;
}

} // namespace

TEST_CASE("1F1B warms up by the stages after it, then alternates", "[pipeline]") {
  auto s = all("1f1b", 4, 1, 4);
  CHECK(text(s[0]) == "F0 F1 F2 F3 B0 B1 B2 B3");
  CHECK(text(s[2]) == "F0 F1 B0 F2 B1 F3 B2 B3");
  CHECK(text(s[3]) == "F0 B0 F1 B1 F2 B2 F3 B3");
  CHECK(text(*pipelinePasses("gpipe", 2, 1, 3, 1)) == "F0 F1 F2 B0 B1 B2");
}

TEST_CASE("interleaved 1F1B follows Megatron's chunk order", "[pipeline]") {
  // 2 stages, 2 chunks, 4 micro-batches: rank 0 warms up with
  // (2-0-1)*2 + (2-1)*2 = 4 forwards: chunk 0 mb 0,1, chunk 1 mb 0,1.
  auto s = all("interleaved", 2, 2, 4);
  CHECK(text(s[0]).rfind("F0 F1 F0c1 F1c1 F2 B0c1", 0) == 0);
  CHECK(s[0].size() == 16);
  CHECK(text(s[1]).rfind("F0 F1 F0c1 B0c1", 0) == 0);
}

TEST_CASE("every schedule runs each pass once and never deadlocks", "[pipeline]") {
  for (int stages : {1, 2, 3, 4, 8})
    for (int micro : {1, 2, 3, 4, 8, 9}) {
      INFO("stages " << stages << " micro " << micro);
      CHECK(simulateSchedules(all("1f1b", stages, 1, micro), 1, micro).isOk());
      CHECK(simulateSchedules(all("gpipe", stages, 1, micro), 1, micro).isOk());
      for (int chunks : {2, 3})
        if (micro % stages == 0) {
          INFO("chunks " << chunks);
          Status st = simulateSchedules(all("interleaved", stages, chunks, micro), chunks, micro);
          CHECK(st.message() == "");
        }
    }
}

TEST_CASE("the simulator catches a deadlock and a missing pass", "[pipeline]") {
  // Stage 1 wants its backward of micro-batch 0 before stage 0 could send
  // the forward of it: stage 0 starts with a backward it cannot run.
  std::vector<std::vector<PipelinePass>> bad = {{{false, 0, 0}, {true, 0, 0}},
                                                {{true, 0, 0}, {false, 0, 0}}};
  CHECK_THAT(simulateSchedules(bad, 1, 1).message(), Catch::Matchers::ContainsSubstring("deadlocks"));
  std::vector<std::vector<PipelinePass>> missing = {{{true, 0, 0}, {false, 0, 0}},
                                                    {{true, 0, 0}}};
  CHECK_THAT(simulateSchedules(missing, 1, 1).message(), Catch::Matchers::ContainsSubstring("deadlocks"));
}

TEST_CASE("schedule errors name the bad value", "[pipeline]") {
  CHECK_THAT(pipelinePasses("interleaved", 2, 2, 3, 0).status().message(),
             Catch::Matchers::ContainsSubstring("divisible by the 2 pipeline stages (got 3)"));
  CHECK_THAT(pipelinePasses("zigzag", 2, 1, 3, 0).status().message(),
             Catch::Matchers::ContainsSubstring("unknown pipeline schedule 'zigzag'"));
  CHECK_THAT(pipelinePasses("1f1b", 2, 2, 4, 0).status().message(),
             Catch::Matchers::ContainsSubstring("one model chunk per stage"));
}

TEST_CASE("stages are cut at pivots to balance the cost", "[pipeline]") {
  // Nodes 0..9 cost 1 each except node 5 (cost 6); cuts allowed before 2,
  // 4, 6, 8. Two stages: [0,6) costs 11 and [6,10) 4, or [0,4) 4 and [4,10)
  // 11: 11 either way, the first found wins; three stages: [0,4) [4,6) [6,10)
  // = 4, 7, 4.
  std::vector<double> cost(10, 1.0);
  cost[5] = 6;
  auto two = plan::balancedCuts(cost, {2, 4, 6, 8}, 2);
  REQUIRE(two.isOk());
  CHECK(two->size() == 2);
  CHECK((*two)[0] == 0);
  auto three = plan::balancedCuts(cost, {2, 4, 6, 8}, 3);
  REQUIRE(three.isOk());
  CHECK(*three == std::vector<int64_t>{0, 4, 6});
  CHECK_THAT(plan::balancedCuts(cost, {5}, 3).status().message(),
             Catch::Matchers::ContainsSubstring("cannot cut the model into 3 pipeline stages"));
}

namespace {

PassSeconds uniform(int virtualStages, double f, double b, double transfer) {
  PassSeconds t;
  t.forward.assign(static_cast<size_t>(virtualStages), f);
  t.backward.assign(static_cast<size_t>(virtualStages), b);
  t.transfer.assign(static_cast<size_t>(virtualStages - 1), transfer);
  return t;
}

double span(const std::vector<double> &finish) {
  return *std::max_element(finish.begin(), finish.end());
}

} // namespace

TEST_CASE("timed schedules meet the bubble formula", "[pipeline]") {
  // Equal stages, free transfers: 1F1B and GPipe take (m + S - 1)(f + b).
  for (int stages : {1, 2, 4})
    for (int micro : {1, 4, 8}) {
      INFO("stages " << stages << " micro " << micro);
      auto f1 = timeSchedules(all("1f1b", stages, 1, micro), 1, micro, uniform(stages, 1, 2, 0));
      REQUIRE(f1.isOk());
      CHECK(span(*f1) == Approx((micro + stages - 1) * 3.0));
      auto gp = timeSchedules(all("gpipe", stages, 1, micro), 1, micro, uniform(stages, 1, 2, 0));
      REQUIRE(gp.isOk());
      CHECK(span(*gp) == Approx((micro + stages - 1) * 3.0));
    }
  // Interleaved over v chunks of a v-times smaller model: (m v + S - 1)(f + b) per chunk.
  auto il = timeSchedules(all("interleaved", 2, 2, 4), 2, 4, uniform(4, 0.5, 1.0, 0));
  REQUIRE(il.isOk());
  CHECK(span(*il) == Approx((4 * 2 + 2 - 1) * 1.5));
  // A transfer delays each of the 2 (S - 1) crossings of the critical path once.
  auto slow = timeSchedules(all("1f1b", 2, 1, 1), 1, 1, uniform(2, 1, 2, 0.25));
  REQUIRE(slow.isOk());
  CHECK(span(*slow) == Approx(6.0 + 2 * 0.25));
  // The slowest stage sets the pace: S = 2, m = 4, stage 1 twice as slow.
  PassSeconds uneven = uniform(2, 1, 2, 0);
  uneven.forward[1] = 2, uneven.backward[1] = 4;
  auto u = timeSchedules(all("1f1b", 2, 1, 4), 1, 4, uneven);
  REQUIRE(u.isOk());
  CHECK(span(*u) == Approx(1 + 4 * 6.0 + 2));
  CHECK_THAT(timeSchedules(all("1f1b", 2, 1, 4), 1, 4, uniform(3, 1, 1, 0)).status().message(),
             Catch::Matchers::ContainsSubstring("pass times for 2 virtual stages"));
}

TEST_CASE("activations in flight follow the schedule", "[pipeline]") {
  for (int s = 0; s < 4; ++s) {
    CHECK(peakInFlight(*pipelinePasses("1f1b", 4, 1, 8, s)) == 4 - s);
    CHECK(peakInFlight(*pipelinePasses("1f1b", 4, 1, 2, s)) == std::min(2, 4 - s));
    CHECK(peakInFlight(*pipelinePasses("gpipe", 4, 1, 8, s)) == 8);
  }
  // Interleaved: stage 0 of 2 with 2 chunks and 4 micro-batches warms up 4
  // forwards (F0 F1 F0c1 F1c1) and holds at most 5; by bytes its peak is
  // after F2 B0c1 F3: chunk 0's four micro-batches and chunk 1's second.
  auto passes = *pipelinePasses("interleaved", 2, 2, 4, 0);
  CHECK(peakInFlight(passes) == 5);
  CHECK(peakActivations(passes, {10, 1}) == Approx(4 * 10 + 1 * 1));
}
