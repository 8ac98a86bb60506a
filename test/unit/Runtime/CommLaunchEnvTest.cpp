// readLaunchEnv over torchrun, Open MPI and Slurm variables.
#include "../CatchCompat.h"

#include <map>

#include "nnsc/Runtime/LaunchEnv.h"

using namespace nnsc;
using namespace nnsc::rt;
using Catch::Matchers::ContainsSubstring;
using Vars = std::map<std::string, std::string>;

namespace {

EnvLookup lookupIn(const Vars &vars) {
  return [vars](const std::string &name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end())
      return std::nullopt;
    return it->second;
  };
}

Vars torchrun() {
  return {{"RANK", "5"},
          {"WORLD_SIZE", "8"},
          {"LOCAL_RANK", "1"},
          {"LOCAL_WORLD_SIZE", "4"},
          {"MASTER_ADDR", "node0"},
          {"MASTER_PORT", "29400"}};
}

std::string errorOf(const Vars &vars) {
  auto env = readLaunchEnv(lookupIn(vars));
  return env.isOk() ? "" : env.status().message();
}

} // namespace

TEST_CASE("no launcher variables means a single process") {
  auto env = readLaunchEnv(lookupIn({}));
  REQUIRE(env.isOk());
  CHECK(env->rank == 0);
  CHECK(env->worldSize == 1);
  CHECK(env->source == "single process");
  CHECK(env->masterAddr == "127.0.0.1");
}

TEST_CASE("torchrun's variables, with and without the agent store") {
  Vars vars = torchrun();
  auto env = readLaunchEnv(lookupIn(vars));
  REQUIRE(env.isOk());
  CHECK(env->source == "torchrun");
  CHECK(env->rank == 5);
  CHECK(env->worldSize == 8);
  CHECK(env->localRank == 1);
  CHECK(env->localWorldSize == 4);
  CHECK(env->masterAddr == "node0");
  CHECK(env->masterPort == 29400);
  CHECK_FALSE(env->useAgentStore);
  vars["TORCHELASTIC_USE_AGENT_STORE"] = "True";
  vars["TORCHELASTIC_RESTART_COUNT"] = "2";
  env = readLaunchEnv(lookupIn(vars));
  REQUIRE(env.isOk());
  CHECK(env->useAgentStore);
  CHECK(env->restartCount == 2);
}

TEST_CASE("missing or inconsistent torchrun variables are named") {
  Vars vars = torchrun();
  vars.erase("LOCAL_WORLD_SIZE");
  CHECK_THAT(errorOf(vars), ContainsSubstring("LOCAL_WORLD_SIZE is not set"));
  vars = torchrun();
  vars["RANK"] = "8";
  CHECK(errorOf(vars) == "RANK=8 is out of range for WORLD_SIZE=8");
  vars = torchrun();
  vars["WORLD_SIZE"] = "eight";
  CHECK(errorOf(vars) == "WORLD_SIZE='eight' is not an integer");
  vars = torchrun();
  vars["LOCAL_RANK"] = "4";
  CHECK(errorOf(vars) == "LOCAL_RANK=4 is out of range for LOCAL_WORLD_SIZE=4");
  vars = torchrun();
  vars["LOCAL_WORLD_SIZE"] = "9";
  CHECK(errorOf(vars) == "LOCAL_WORLD_SIZE=9 must be between 1 and WORLD_SIZE=8");
  vars = torchrun();
  vars["MASTER_PORT"] = "70000";
  CHECK(errorOf(vars) == "MASTER_PORT=70000 is not a usable port (1-65535)");
  vars = torchrun();
  vars.erase("MASTER_ADDR");
  CHECK_THAT(errorOf(vars), ContainsSubstring("MASTER_ADDR is not set"));
}

TEST_CASE("Open MPI's variables") {
  Vars vars{{"OMPI_COMM_WORLD_RANK", "2"},
            {"OMPI_COMM_WORLD_SIZE", "4"},
            {"OMPI_COMM_WORLD_LOCAL_RANK", "2"},
            {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}};
  auto env = readLaunchEnv(lookupIn(vars));
  REQUIRE(env.isOk());
  CHECK(env->source == "openmpi");
  CHECK(env->rank == 2);
  CHECK(env->masterAddr == "127.0.0.1"); // one node: loopback
  CHECK(env->masterPort == kDefaultMasterPort);
  vars["OMPI_COMM_WORLD_LOCAL_SIZE"] = "2";
  vars["OMPI_COMM_WORLD_LOCAL_RANK"] = "0";
  CHECK_THAT(errorOf(vars), ContainsSubstring("MASTER_ADDR is not set; Open MPI does not export"));
  vars["MASTER_ADDR"] = "head";
  env = readLaunchEnv(lookupIn(vars));
  REQUIRE(env.isOk());
  CHECK(env->masterAddr == "head");
}

TEST_CASE("Slurm's variables") {
  Vars vars{{"SLURM_PROCID", "5"},           {"SLURM_NTASKS", "7"},
            {"SLURM_LOCALID", "1"},          {"SLURM_NODEID", "1"},
            {"SLURM_TASKS_PER_NODE", "4,3"}, {"SLURM_JOB_NODELIST", "gpu[007-009,12],cpu1"}};
  auto env = readLaunchEnv(lookupIn(vars));
  REQUIRE(env.isOk());
  CHECK(env->source == "slurm");
  CHECK(env->rank == 5);
  CHECK(env->worldSize == 7);
  CHECK(env->localRank == 1);
  CHECK(env->localWorldSize == 3);
  CHECK(env->masterAddr == "gpu007");
  CHECK(env->masterPort == kDefaultMasterPort);
  vars["SLURM_TASKS_PER_NODE"] = "2(x3),1";
  vars["SLURM_NTASKS"] = "7";
  env = readLaunchEnv(lookupIn(vars));
  REQUIRE(env.isOk());
  CHECK(env->localWorldSize == 2);
  vars.erase("SLURM_LOCALID");
  CHECK_THAT(errorOf(vars), ContainsSubstring("SLURM_LOCALID is not set"));
  vars["SLURM_LOCALID"] = "3";
  vars["SLURM_NTASKS_PER_NODE"] = "2";
  CHECK(errorOf(vars) == "SLURM_LOCALID=3 is out of range for SLURM_NTASKS_PER_NODE=2");
}

TEST_CASE("the first host of a Slurm node list") {
  CHECK(firstSlurmHost("node1") == "node1");
  CHECK(firstSlurmHost("a1,b2") == "a1");
  CHECK(firstSlurmHost("gpu[003-005,9],cpu1") == "gpu003");
  CHECK(firstSlurmHost("x[12]") == "x12");
  CHECK(firstSlurmHost("cpu1,gpu[1-2]") == "cpu1");
}
