#include "nnsc/Runtime/LaunchEnv.h"

#include <cerrno>
#include <cstdlib>
#include <vector>

namespace nnsc::rt {

namespace {

// Reads variables through an EnvLookup and remembers the first error, so a
// launcher's parser reads as a list of fields.
class EnvReader {
public:
  explicit EnvReader(const EnvLookup &env) : env_(env) {}

  bool has(const std::string &name) const { return env_(name).has_value(); }
  std::optional<std::string> get(const std::string &name) const { return env_(name); }

  /// The integer value of `name`; `fallback` when unset, an error when unset
  /// and there is no fallback.
  int integer(const std::string &name, std::optional<int> fallback = std::nullopt) {
    std::optional<std::string> text = env_(name);
    if (!text) {
      if (!fallback)
        fail(errorf("{} is not set (launched by {}?)", name, launcher_));
      return fallback.value_or(0);
    }
    errno = 0;
    char *end = nullptr;
    long value = std::strtol(text->c_str(), &end, 10);
    if (text->empty() || *end != '\0' || errno == ERANGE || value < INT32_MIN ||
        value > INT32_MAX) {
      fail(errorf("{}='{}' is not an integer", name, *text));
      return 0;
    }
    return static_cast<int>(value);
  }

  std::string string(const std::string &name, std::optional<std::string> fallback) {
    std::optional<std::string> text = env_(name);
    if (text && !text->empty())
      return *text;
    if (!fallback)
      fail(errorf("{} is not set (launched by {}?)", name, launcher_));
    return fallback.value_or("");
  }

  void fail(Status status) {
    if (status_.isOk())
      status_ = std::move(status);
  }
  void setLauncher(std::string name) { launcher_ = std::move(name); }
  const Status &status() const { return status_; }

private:
  const EnvLookup &env_;
  std::string launcher_;
  Status status_;
};

bool isTrue(const std::optional<std::string> &value) {
  return value && (*value == "True" || *value == "true" || *value == "1");
}

void readTorchrun(EnvReader &in, LaunchEnv &out) {
  in.setLauncher("torchrun");
  out.source = "torchrun";
  out.rank = in.integer("RANK");
  out.worldSize = in.integer("WORLD_SIZE");
  out.localRank = in.integer("LOCAL_RANK");
  out.localWorldSize = in.integer("LOCAL_WORLD_SIZE");
  out.masterAddr = in.string("MASTER_ADDR", std::nullopt);
  out.masterPort = in.integer("MASTER_PORT");
  out.useAgentStore = isTrue(in.get("TORCHELASTIC_USE_AGENT_STORE"));
  out.restartCount = in.integer("TORCHELASTIC_RESTART_COUNT", 0);
}

void readOpenMpi(EnvReader &in, LaunchEnv &out) {
  in.setLauncher("Open MPI");
  out.source = "openmpi";
  out.rank = in.integer("OMPI_COMM_WORLD_RANK");
  out.worldSize = in.integer("OMPI_COMM_WORLD_SIZE");
  out.localRank = in.integer("OMPI_COMM_WORLD_LOCAL_RANK");
  out.localWorldSize = in.integer("OMPI_COMM_WORLD_LOCAL_SIZE");
  // Open MPI does not export rank 0's address; one node can use loopback.
  bool oneNode = out.localWorldSize == out.worldSize;
  if (!oneNode && !in.has("MASTER_ADDR"))
    in.fail(errorf("MASTER_ADDR is not set; Open MPI does not export the address of rank 0, "
                   "so a job over several nodes needs it (mpirun -x MASTER_ADDR=<host>)"));
  out.masterAddr = in.string("MASTER_ADDR", std::string("127.0.0.1"));
  out.masterPort = in.integer("MASTER_PORT", kDefaultMasterPort);
}

// SLURM_TASKS_PER_NODE looks like "4(x2),3": 4 tasks on each of two nodes,
// then 3. Returns the count for node `nodeId`, or -1 if it cannot tell.
int slurmTasksOnNode(const std::string &spec, int nodeId) {
  std::vector<int> perNode;
  size_t pos = 0;
  while (pos < spec.size()) {
    size_t comma = spec.find(',', pos);
    std::string item = spec.substr(pos, comma == std::string::npos ? comma : comma - pos);
    pos = comma == std::string::npos ? spec.size() : comma + 1;
    int count = std::atoi(item.c_str());
    int repeat = 1;
    if (size_t x = item.find("(x"); x != std::string::npos)
      repeat = std::atoi(item.c_str() + x + 2);
    if (count <= 0 || repeat <= 0)
      return -1;
    perNode.insert(perNode.end(), repeat, count);
  }
  if (nodeId < 0 || nodeId >= static_cast<int>(perNode.size()))
    return -1;
  return perNode[nodeId];
}

void readSlurm(EnvReader &in, LaunchEnv &out) {
  in.setLauncher("Slurm's srun");
  out.source = "slurm";
  out.rank = in.integer("SLURM_PROCID");
  out.worldSize = in.integer("SLURM_NTASKS", in.integer("SLURM_NPROCS", 1));
  out.localRank = in.integer("SLURM_LOCALID");
  if (in.has("SLURM_NTASKS_PER_NODE")) {
    out.localWorldSize = in.integer("SLURM_NTASKS_PER_NODE");
  } else {
    std::string spec = in.string("SLURM_TASKS_PER_NODE", std::nullopt);
    out.localWorldSize = slurmTasksOnNode(spec, in.integer("SLURM_NODEID", 0));
    if (out.localWorldSize < 0)
      in.fail(errorf("SLURM_TASKS_PER_NODE='{}' does not say how many tasks run on node "
                     "SLURM_NODEID={}",
                     spec, in.integer("SLURM_NODEID", 0)));
  }
  std::string nodes = in.string("SLURM_JOB_NODELIST", in.string("SLURM_NODELIST", ""));
  std::string fallback = nodes.empty() ? "127.0.0.1" : firstSlurmHost(nodes);
  if (nodes.empty() && out.worldSize > 1 && !in.has("MASTER_ADDR"))
    in.fail(errorf("neither MASTER_ADDR nor SLURM_JOB_NODELIST is set; cannot find rank 0"));
  out.masterAddr = in.string("MASTER_ADDR", fallback);
  out.masterPort = in.integer("MASTER_PORT", kDefaultMasterPort);
}

// Names of the variables that hold each field, for messages.
struct FieldNames {
  const char *rank, *world, *localRank, *localWorld, *port;
};

FieldNames namesFor(const std::string &source) {
  if (source == "openmpi")
    return {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
            "OMPI_COMM_WORLD_LOCAL_SIZE", "MASTER_PORT"};
  if (source == "slurm")
    return {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE",
            "MASTER_PORT"};
  return {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_PORT"};
}

Status checkConsistent(const LaunchEnv &e) {
  FieldNames n = namesFor(e.source);
  if (e.worldSize < 1)
    return errorf("{}={} must be at least 1", n.world, e.worldSize);
  if (e.rank < 0 || e.rank >= e.worldSize)
    return errorf("{}={} is out of range for {}={}", n.rank, e.rank, n.world, e.worldSize);
  if (e.localWorldSize < 1 || e.localWorldSize > e.worldSize)
    return errorf("{}={} must be between 1 and {}={}", n.localWorld, e.localWorldSize, n.world,
                  e.worldSize);
  if (e.localRank < 0 || e.localRank >= e.localWorldSize)
    return errorf("{}={} is out of range for {}={}", n.localRank, e.localRank, n.localWorld,
                  e.localWorldSize);
  if (e.masterPort < 0 || e.masterPort > 65535 || (e.masterPort == 0 && e.worldSize > 1))
    return errorf("{}={} is not a usable port (1-65535)", n.port, e.masterPort);
  return Status::ok();
}

} // namespace

EnvLookup processEnv() {
  return [](const std::string &name) -> std::optional<std::string> {
    const char *value = std::getenv(name.c_str());
    if (!value)
      return std::nullopt;
    return std::string(value);
  };
}

Expected<LaunchEnv> readLaunchEnv(const EnvLookup &env) {
  EnvReader in(env);
  LaunchEnv out;
  if (in.has("RANK") || in.has("WORLD_SIZE"))
    readTorchrun(in, out);
  else if (in.has("OMPI_COMM_WORLD_RANK") || in.has("OMPI_COMM_WORLD_SIZE"))
    readOpenMpi(in, out);
  else if (in.has("SLURM_PROCID"))
    readSlurm(in, out);
  NNSC_RETURN_IF_ERROR(in.status());
  NNSC_RETURN_IF_ERROR(checkConsistent(out));
  return out;
}

std::string firstSlurmHost(const std::string &nodeList) {
  size_t bracket = nodeList.find('[');
  size_t comma = nodeList.find(',');
  if (bracket == std::string::npos || (comma != std::string::npos && comma < bracket))
    return nodeList.substr(0, comma);
  // "gpu[003-005,9]": the prefix plus the first number of the first range.
  size_t end = nodeList.find_first_of("-,]", bracket + 1);
  return nodeList.substr(0, bracket) + nodeList.substr(bracket + 1, end - bracket - 1);
}

} // namespace nnsc::rt
