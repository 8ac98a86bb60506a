#pragma once
// The state of one trainer worker, shared by TrainerSetup.cpp (building it)
// and Trainer.cpp (the loop). Private to the runtime.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include "nnsc/Runtime/Comm.h"
#include "nnsc/Runtime/Dataset.h"
#include "nnsc/Runtime/LaunchEnv.h"
#include "nnsc/Runtime/LrSchedule.h"
#include "nnsc/Runtime/Optimizer.h"
#include "nnsc/Runtime/Program.h"
#include "nnsc/Runtime/Reducer.h"
#include "nnsc/Runtime/ShardTable.h"
#include "nnsc/Runtime/TrainerConfig.h"
#include "nnsc/manifest.pb.h"

namespace nnsc::rt {

/// What feeds one program argument: a shard, a data field, or the device
/// (an argument named `device`, where the program creates tensors).
struct ArgBinding {
  int shard = -1; ///< index into TrainerState::shards
  int input = -1; ///< 0 = x, 1 = y
  bool device = false;
};

struct TrainerState {
  TrainerConfig config;
  LaunchEnv env;
  proto::RankManifest manifest;
  std::string programDir;
  std::vector<ShardInfo> shardInfo;
  std::vector<at::Tensor> shards; ///< leaves, same order as shardInfo
  std::optional<Program> program;
  std::vector<ArgBinding> args;
  std::vector<at::ScalarType> inputTypes; ///< of x and y
  std::unique_ptr<CommWorld> comm;
  std::vector<std::unique_ptr<Reducer>> reducers;
  std::unique_ptr<Optimizer> optimizer;
  std::unique_ptr<LrSchedule> schedule;
  std::optional<TokenDataset> trainData, valData;
  SampleLayout layout;
  at::Device device{at::kCPU};
  int64_t blockSize = 0;
  int64_t startStep = 0;   ///< steps already done (resume)
  std::string resumedFrom; ///< checkpoint directory, if any
  std::vector<at::Tensor> trainable;
  std::vector<int> trainableReplicas;

  bool isLogger() const { return env.rank == 0; }
};

/// Builds the worker: manifest, shards, program, comm world, reducers,
/// optimizer, data; seeds and sets threads.
Expected<std::unique_ptr<TrainerState>> setupTrainer(const TrainerConfig &config,
                                                     const LaunchEnv &env);

/// Restores the newest complete checkpoint (per checkpoint.resume), if any.
Status resumeTrainer(TrainerState &s);

/// Writes checkpoint step-<step> (all ranks; rank 0 marks it complete and
/// prunes old ones).
Status saveCheckpoint(TrainerState &s, int64_t step, double lr);

/// Runs the program on one batch; returns the loss output.
Expected<at::Tensor> forwardLoss(TrainerState &s, const TokenBatch &batch);

} // namespace nnsc::rt
