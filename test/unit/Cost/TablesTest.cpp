// Device specs and comm tables: parsing, errors, interpolation.
#include "../CatchCompat.h"

#include <cmath>

#include "nnsc/Cost/Cluster.h"

using namespace nnsc;
using Catch::Matchers::ContainsSubstring;
using cost::Collective;
using cost::Placement;

namespace {

const char *kSpec = R"(name: test-gpu
sources: ["hand-written for a unit test"]
flops:
  float32: 1.0e12
  bfloat16: 4.0e12
memory_bytes: 8.0e10
memory_bandwidth: 1.0e12
launch_floor: 2.0e-6
efficiency:
  matmul: 0.5
  memory: 0.8
)";

const char *kTable = R"(version: 1
backend: nccl
device: test-gpu
sources: ["hand-written"]
curves:
  - collective: all_reduce
    group: 4
    placement: intra
    points:
      - [1000, 1.0e-5]
      - [2000, 2.0e-5]
      - [4000, 3.0e-5]
  - collective: all_reduce
    group: 2
    placement: intra
    points:
      - [1000, 1.0e-5]
      - [4000, 2.0e-5]
)";

std::string replaced(std::string text, const std::string &from, const std::string &to) {
  text.replace(text.find(from), from.size(), to);
  return text;
}

} // namespace

TEST_CASE("device specs parse and name the key, file and line of an error", "[cost]") {
  auto spec = cost::parseDeviceSpec(kSpec, "gpu.yaml");
  REQUIRE(spec.isOk());
  CHECK(spec->name == "test-gpu");
  CHECK(spec->peakFlops(ir::DType::BFloat16) == 4e12);
  CHECK(spec->peakFlops(ir::DType::Float16) == 1e12); // absent: the float32 rate
  CHECK(spec->matmulEfficiency == 0.5);
  auto unknown = cost::parseDeviceSpec(replaced(kSpec, "launch_floor", "launch_flor"), "gpu.yaml");
  CHECK_THAT(
      unknown.status().message(),
      ContainsSubstring("gpu.yaml:8:1: error: unknown key 'launch_flor' in the device spec"));
  auto negative = cost::parseDeviceSpec(replaced(kSpec, "8.0e10", "-8.0e10"), "gpu.yaml");
  CHECK_THAT(
      negative.status().message(),
      ContainsSubstring("gpu.yaml:6:15: error: 'memory_bytes' must be positive, got -8.0e10"));
  auto word = cost::parseDeviceSpec(replaced(kSpec, "0.5", "fast"), "gpu.yaml");
  CHECK_THAT(word.status().message(),
             ContainsSubstring("gpu.yaml:10:11: error: 'efficiency.matmul' must be a number, got "
                               "'fast'"));
  auto missing = cost::parseDeviceSpec(replaced(kSpec, "memory_bandwidth: 1.0e12\n", ""), "g.yaml");
  CHECK_THAT(missing.status().message(),
             ContainsSubstring("missing key 'memory_bandwidth' in the device spec"));
  auto badFlops = cost::parseDeviceSpec(replaced(kSpec, "bfloat16:", "bf16:"), "g.yaml");
  CHECK_THAT(badFlops.status().message(), ContainsSubstring("unknown key 'bf16' in 'flops'"));
  // random_rate is optional: absent it is 0 (not a limit); present it must be positive.
  CHECK(spec->randomRate == 0);
  std::string withRate = replaced(kSpec, "launch_floor", "random_rate: 1.7e8\nlaunch_floor");
  auto rated = cost::parseDeviceSpec(withRate, "cpu.yaml");
  REQUIRE(rated.isOk());
  CHECK(rated->randomRate == 1.7e8);
  auto badRate = cost::parseDeviceSpec(replaced(withRate, "1.7e8", "-1"), "cpu.yaml");
  CHECK_THAT(badRate.status().message(),
             ContainsSubstring("cpu.yaml:8:14: error: 'random_rate' must be positive, got -1"));
}

TEST_CASE("a device spec's batched products: parsed, interpolated, named in errors", "[cost]") {
  std::string text = replaced(kSpec, "  memory: 0.8",
                              "  memory: 0.8\n  batched_matmul: {128: 0.9, 32: 0.5, 64: 0.7}");
  auto spec = cost::parseDeviceSpec(text, "cpu.yaml");
  REQUIRE(spec.isOk());
  REQUIRE(spec->batchedMatmul.size() == 3);
  CHECK(spec->batchedMatmul.front().first == 32); // sorted by dim
  CHECK(spec->batchedMatmulEfficiency(64) == Approx(0.7));
  CHECK(spec->batchedMatmulEfficiency(16) == Approx(0.5));   // below: the nearest
  CHECK(spec->batchedMatmulEfficiency(1024) == Approx(0.9)); // above: the nearest
  // In log2 of the dim: 45.25 = 2^5.5 lies halfway between 32 and 64.
  CHECK(spec->batchedMatmulEfficiency(std::exp2(5.5)) == Approx(0.6));
  auto absent = cost::parseDeviceSpec(kSpec, "gpu.yaml");
  REQUIRE(absent.isOk());
  CHECK(absent->batchedMatmulEfficiency(32) == 1.0);
  auto over = cost::parseDeviceSpec(replaced(text, "128: 0.9", "128: 1.5"), "cpu.yaml");
  CHECK_THAT(over.status().message(),
             ContainsSubstring("'efficiency.batched_matmul.128' is a fraction of the matmul rate"));
  auto twice = cost::parseDeviceSpec(replaced(text, "64: 0.7", "32: 0.7"), "cpu.yaml");
  CHECK_THAT(twice.status().message(), ContainsSubstring("gives dim 32 twice"));
  auto list = cost::parseDeviceSpec(replaced(text, "{128: 0.9, 32: 0.5, 64: 0.7}", "[1, 2]"),
                                    "cpu.yaml");
  CHECK_THAT(list.status().message(),
             ContainsSubstring("cpu.yaml:12:19: error: 'efficiency.batched_matmul' must map"));
}

TEST_CASE("the shipped device specs and comm tables load", "[cost]") {
  for (const char *name : {"h100-sxm", "h200-sxm", "a100-80gb", "mi250x", "mi300x"}) {
    auto cluster =
        cost::loadCluster(std::string(NNSC_SOURCE_DIR) + "/configs/clusters/" + name + ".yaml");
    INFO(name << ": " << cluster.status().message());
    REQUIRE(cluster.isOk());
    CHECK(cluster->device.name == name);
    REQUIRE(cluster->comm);
    CHECK(cluster->comm->device == name);
    for (Collective c : {Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter,
                         Collective::AllToAll, Collective::Broadcast, Collective::SendRecv})
      for (Placement p : {Placement::Intra, Placement::Inter})
        CHECK(cluster->comm->has(c, p));
  }
}

TEST_CASE("comm lookup: piecewise linear, clamped below, alpha-beta above", "[cost]") {
  auto table = cost::parseCommTable(kTable, "comm.yaml");
  REQUIRE(table.isOk());
  auto t = [&](int64_t bytes, int group) {
    return *table->time(Collective::AllReduce, bytes, group, Placement::Intra);
  };
  CHECK(t(500, 4) == Catch::Approx(1e-5));
  CHECK(t(1500, 4) == Catch::Approx(1.5e-5));
  CHECK(t(3000, 4) == Catch::Approx(2.5e-5));
  CHECK(t(8000, 4) == Catch::Approx(3e-5 + 4000 * (1e-5 / 2000)));
  CHECK(t(1 << 20, 1) == 0);
  CHECK(t(0, 4) == 0);
}

TEST_CASE("comm lookup over group sizes follows the ring model", "[cost]") {
  auto table = cost::parseCommTable(kTable, "comm.yaml");
  REQUIRE(table.isOk());
  // Group 8 from group 4: latency kept, bandwidth term scaled by
  // busFactor(8) / busFactor(4) = 1.75 / 1.5.
  double t8 = *table->time(Collective::AllReduce, 4000, 8, Placement::Intra);
  CHECK(t8 == Catch::Approx(1e-5 + 2e-5 * (1.75 / 1.5)));
  // Group 3 between the measured 2 and 4: both scaled, then interpolated.
  double from2 = 1e-5 + 1e-5 * ((4.0 / 3) / 1.0), from4 = 1e-5 + 2e-5 * ((4.0 / 3) / 1.5);
  CHECK(*table->time(Collective::AllReduce, 4000, 3, Placement::Intra) ==
        Catch::Approx(0.5 * from2 + 0.5 * from4));
  auto missing = table->time(Collective::AllGather, 4000, 4, Placement::Intra);
  CHECK(missing.status().message() ==
        "comm.yaml: error: no all_gather curve for intra groups (the table has none for any "
        "group size)");
  CHECK_FALSE(table->time(Collective::AllReduce, 4000, 4, Placement::Inter).isOk());
}

TEST_CASE("bad comm tables name the file, curve and point", "[cost]") {
  auto unsorted =
      cost::parseCommTable(replaced(kTable, "[2000, 2.0e-5]", "[512, 2.0e-5]"), "comm.yaml");
  INFO(unsorted.status().message());
  CHECK(unsorted.status().message().rfind(
            "comm.yaml:11:9: error: curve 1 (all_reduce, group 4, intra): point 2: bytes 512 not "
            "above 1000",
            0) == 0);
  auto zero = cost::parseCommTable(replaced(kTable, "[2000, 2.0e-5]", "[2000, 0]"), "comm.yaml");
  CHECK_THAT(zero.status().message(),
             ContainsSubstring("curve 1 (all_reduce, group 4, intra): point 2: seconds' must be "
                               "positive"));
  auto dup = cost::parseCommTable(replaced(kTable, "group: 2", "group: 4"), "comm.yaml");
  CHECK_THAT(dup.status().message(),
             ContainsSubstring("comm.yaml:13:5: error: curve 2 (all_reduce, group 4, intra): "
                               "duplicate of an earlier curve"));
  auto coll = cost::parseCommTable(replaced(kTable, "all_reduce", "allreduce"), "comm.yaml");
  CHECK_THAT(coll.status().message(), ContainsSubstring("unknown collective 'allreduce'"));
  auto group = cost::parseCommTable(replaced(kTable, "group: 2", "group: 1"), "comm.yaml");
  CHECK_THAT(group.status().message(), ContainsSubstring("must be at least 2, got 1"));
}

TEST_CASE("clusters place groups within or across nodes", "[cost]") {
  cost::Cluster c;
  c.devicesPerNode = 4;
  CHECK(c.placementOf({0, 1, 3}) == Placement::Intra);
  CHECK(c.placementOf({3, 4}) == Placement::Inter);
  CHECK(*c.commTime(Collective::AllReduce, 1024, {2}) == 0);
  CHECK_THAT(c.commTime(Collective::AllReduce, 1024, {0, 1}).status().message(),
             ContainsSubstring("no communication table"));
}

TEST_CASE("a device spec's vector_ops: parsed, checked, named in errors", "[cost]") {
  std::string text = replaced(kSpec, "launch_floor",
                              "vector_ops:\n  gelu: [7e-10, 0, 1.6e-9, 0]\n"
                              "  softmax: [8e-10, 1e-8, 3e-10, 6e-9]\nlaunch_floor");
  auto spec = cost::parseDeviceSpec(text, "cpu.yaml");
  INFO(spec.status().message());
  REQUIRE(spec.isOk());
  REQUIRE(spec->vectorOps.size() == 2);
  CHECK(spec->vectorOps.at("gelu").backwardPerElement == 1.6e-9);
  CHECK(spec->vectorOps.at("softmax").forwardPerRow == 1e-8);
  auto absent = cost::parseDeviceSpec(kSpec, "gpu.yaml");
  REQUIRE(absent.isOk());
  CHECK(absent->vectorOps.empty());
  auto kind = cost::parseDeviceSpec(replaced(text, "gelu:", "relu:"), "cpu.yaml");
  CHECK_THAT(kind.status().message(),
             ContainsSubstring("cpu.yaml:9:3: error: unknown key 'relu' in 'vector_ops'"));
  auto three = cost::parseDeviceSpec(replaced(text, "[7e-10, 0, 1.6e-9, 0]", "[7e-10, 0, 1.6e-9]"),
                                     "cpu.yaml");
  CHECK_THAT(three.status().message(),
             ContainsSubstring("'vector_ops.gelu' must be a list of 4 numbers"));
  auto update = cost::parseDeviceSpec(replaced(text, "launch_floor", "update_bandwidth: 3.5e10\n"
                                                                     "launch_floor"),
                                      "cpu.yaml");
  REQUIRE(update.isOk());
  CHECK(update->updateBandwidth == 3.5e10);
  CHECK(spec->updateBandwidth == 0);
  auto slow = cost::parseDeviceSpec(replaced(kSpec, "launch_floor", "update_bandwidth: 0\n"
                                                                    "launch_floor"),
                                    "cpu.yaml");
  CHECK_THAT(slow.status().message(), ContainsSubstring("'update_bandwidth' must be positive"));
  auto huge = cost::parseDeviceSpec(replaced(text, "1.6e-9", "5"), "cpu.yaml");
  CHECK_THAT(huge.status().message(),
             ContainsSubstring("'vector_ops.gelu' 5 is outside the range real devices have"));
}
