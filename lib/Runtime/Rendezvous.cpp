// CommWorld: the rendezvous store, the world group and the manifest groups.
#include <algorithm>

#include <fmt/format.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "Backends.h"
#include "nnsc/Runtime/Comm.h"
#include "nnsc/Torch/Compat.h"

namespace nnsc::rt {

namespace {

// Rank 0 hosts the store unless torchrun's agent already does; everyone else
// connects, retrying until the timeout.
Expected<c10::intrusive_ptr<c10d::Store>> connectStore(const LaunchEnv &env,
                                                       std::chrono::milliseconds timeout) {
  bool host = env.rank == 0 && !env.useAgentStore;
  c10d::TCPStoreOptions opts = torchcompat::tcpStoreOptions();
  opts.port = static_cast<uint16_t>(env.masterPort);
  opts.isServer = host;
  opts.numWorkers = env.worldSize;
  opts.waitWorkers = false; // the world group's creation is the rendezvous
  opts.timeout = timeout;
  c10::intrusive_ptr<c10d::Store> store;
  try {
    store = c10::make_intrusive<c10d::TCPStore>(env.masterAddr, opts);
  } catch (const std::exception &e) {
    std::string where = fmt::format("{}:{}", env.masterAddr, env.masterPort);
    if (host)
      return errorf("rank 0 cannot host the rendezvous store on {}: {}", where,
                    exceptionMessage(e));
    return errorf("rank {} cannot reach the rendezvous store at {} within {} ms (is {} "
                  "running? MASTER_ADDR and MASTER_PORT name it): {}",
                  env.rank, where, timeout.count(),
                  env.useAgentStore ? "the launcher's agent" : "rank 0", exceptionMessage(e));
  }
  if (env.useAgentStore)
    return c10::intrusive_ptr<c10d::Store>(c10::make_intrusive<c10d::PrefixStore>(
        fmt::format("/worker/attempt_{}", env.restartCount), store));
  return store;
}

Status checkSpec(const GroupSpec &spec, int worldSize) {
  if (spec.id < 0)
    return errorf("communication group id {} is negative", spec.id);
  if (spec.ranks.empty())
    return errorf("communication group {} has no ranks", spec.id);
  for (size_t i = 0; i < spec.ranks.size(); ++i) {
    if (spec.ranks[i] < 0 || spec.ranks[i] >= worldSize)
      return errorf("communication group {} names rank {}, outside a world of {}", spec.id,
                    spec.ranks[i], worldSize);
    if (i > 0 && spec.ranks[i] <= spec.ranks[i - 1])
      return errorf("communication group {} lists its ranks out of order or twice", spec.id);
  }
  return Status::ok();
}

} // namespace

CommWorld::CommWorld(LaunchEnv env, CommOptions options, c10::intrusive_ptr<c10d::Store> store)
    : env_(std::move(env)), options_(std::move(options)), store_(std::move(store)) {}

CommWorld::~CommWorld() {
  // Only drop registrations that are still ours.
  if (findGroup(kWorldGroup) == world_)
    unregisterGroup(kWorldGroup);
  for (const auto &[id, backend] : groups_)
    if (findGroup(id) == backend)
      unregisterGroup(id);
}

Expected<std::unique_ptr<CommWorld>> CommWorld::create(const LaunchEnv &env,
                                                       const CommOptions &options) {
  auto store = connectStore(env, options.timeout);
  if (!store)
    return store.status();
  std::unique_ptr<CommWorld> world(new CommWorld(env, options, store.take()));
  GroupInfo info;
  info.id = kWorldGroup;
  for (int r = 0; r < env.worldSize; ++r)
    info.ranks.push_back(r);
  info.rank = env.rank;
  info.timeout = options.timeout;
  auto backend = createBackend(info, world->store_, "nnsc/world/", options, env);
  if (!backend)
    return backend.status();
  world->world_ = backend.take();
  registerGroup(kWorldGroup, world->world_);
  return world;
}

Status CommWorld::addGroups(const std::vector<GroupSpec> &groups) {
  std::vector<GroupSpec> sorted = groups;
  // Ascending ids on every rank: the smallest unfinished group always has all
  // its members working on it, so group creation cannot deadlock.
  std::sort(sorted.begin(), sorted.end(),
            [](const GroupSpec &a, const GroupSpec &b) { return a.id < b.id; });
  for (size_t i = 0; i < sorted.size(); ++i) {
    NNSC_RETURN_IF_ERROR(checkSpec(sorted[i], env_.worldSize));
    if (i > 0 && sorted[i].id == sorted[i - 1].id && sorted[i].ranks != sorted[i - 1].ranks)
      return errorf("communication group {} is listed twice with different ranks", sorted[i].id);
  }
  for (const GroupSpec &spec : sorted)
    NNSC_RETURN_IF_ERROR(addGroup(spec));
  return Status::ok();
}

Status CommWorld::addGroup(const GroupSpec &spec) {
  auto me = std::find(spec.ranks.begin(), spec.ranks.end(), env_.rank);
  if (me == spec.ranks.end())
    return Status::ok();
  if (auto it = groups_.find(spec.id); it != groups_.end()) {
    if (it->second->group().ranks != spec.ranks)
      return errorf("communication group {} was already created with other ranks", spec.id);
    return Status::ok();
  }
  GroupInfo info;
  info.id = spec.id;
  info.ranks = spec.ranks;
  info.rank = static_cast<int>(me - spec.ranks.begin());
  info.timeout = options_.timeout;
  auto backend =
      createBackend(info, store_, fmt::format("nnsc/group/{}/", spec.id), options_, env_);
  if (!backend)
    return backend.status();
  groups_[spec.id] = *backend;
  registerGroup(spec.id, backend.take());
  return Status::ok();
}

Expected<std::shared_ptr<CommBackend>> CommWorld::createChannel(const std::vector<int> &ranks,
                                                                const std::string &prefix) {
  GroupSpec spec{kPipelineChannelGroup, ranks};
  auto me = std::find(ranks.begin(), ranks.end(), env_.rank);
  if (me == ranks.end() || !std::is_sorted(ranks.begin(), ranks.end()))
    return Status::internal(fmt::format("error: rank {}: channel ranks {} do not list it, "
                                        "ascending",
                                        env_.rank, fmt::join(ranks, ",")));
  GroupInfo info;
  info.id = spec.id;
  info.ranks = ranks;
  info.rank = static_cast<int>(me - ranks.begin());
  info.timeout = options_.timeout;
  return createBackend(info, store_, prefix, options_, env_);
}

std::shared_ptr<CommBackend> CommWorld::group(int id) const {
  if (id == kWorldGroup)
    return world_;
  auto it = groups_.find(id);
  return it == groups_.end() ? nullptr : it->second;
}

} // namespace nnsc::rt
