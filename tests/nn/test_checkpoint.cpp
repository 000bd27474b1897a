// Checkpoint directories: saving a fake model's shards at one (tp, pp) layout and rebuilding the
// exact full tensors at others, crash safety (DONE, latest), the newest step that loads, and the
// messages for damaged, missing and mismatched files. One process: every "rank" is a loop
// iteration.
#include "nn/checkpoint/checkpoint.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "nn/train/gpt_checkpoint.h"
#include "scratch_dir_test_support.h"
#include "support/error_message.h"

namespace mpitron::nn {
namespace {

using test::message_of;
using test::names;

/// A parameter of the fake model: its full record, its half of the model (0: first pp stage,
/// 1: last) and whether the last stage holds a tied copy of it.
struct FakeParameter {
  TensorRecord record;
  int home = 0;
  bool tied = false;
};

using Fulls = std::map<std::string, Tensor>;

/// Column-parallel, row-parallel and replicated weights, an f64 optimizer moment, a 3-d tensor
/// split along its middle dim, and a tied embedding.
std::vector<FakeParameter> fake_model() {
  return {{{"wte.weight", 0, {8, 6}, DType::f32}, 0, true},
          {{"h.0.q.weight", 0, {4, 6}, DType::f32}, 0, false},
          {{"h.0.proj.weight", 1, {6, 4}, DType::f32}, 0, false},
          {{"h.0.proj.bias", kReplicated, {6}, DType::f32}, 0, false},
          {{"h.1.q.weight", 0, {4, 6}, DType::f32}, 1, false},
          {{"h.1.q.weight.exp_avg", 0, {4, 6}, DType::f64}, 1, false},
          {{"h.1.x", 1, {2, 4, 3}, DType::f32}, 1, false}};
}

std::vector<TensorRecord> records_of(const std::vector<FakeParameter>& model) {
  std::vector<TensorRecord> records;
  for (const FakeParameter& p : model)
    records.push_back(p.record);
  return records;
}

/// Distinct, exactly representable values for every element of every tensor.
Fulls known_fulls(const std::vector<FakeParameter>& model) {
  Fulls fulls;
  double next = 1.0;
  for (const FakeParameter& p : model) {
    std::vector<double> values(autograd::numel_of(p.record.full_shape));
    for (double& v : values)
      v = (next += 0.25) * (values.size() % 2 ? -1 : 1);
    fulls[p.record.name] = Tensor::from_vector(values, p.record.full_shape, p.record.dtype);
  }
  return fulls;
}

nlohmann::json meta_of(int tp, int pp, int dp = 1) {
  return {{"topology", {{"tp", tp}, {"pp", pp}, {"dp", dp}}}, {"seed", 5}};
}

/// Writes every shard of `fulls` at layout (tp, pp), as that run's writer ranks would.
void write_all_shards(const std::filesystem::path& dir, std::int64_t step, int tp, int pp,
                      const std::vector<FakeParameter>& model, const Fulls& fulls) {
  for (int p = 0; p < pp; ++p) {
    for (int t = 0; t < tp; ++t) {
      std::vector<ShardTensor> shard;
      for (const FakeParameter& param : model) {
        const bool here = p == param.home * (pp - 1) || (param.tied && p == pp - 1);
        if (!here) continue;
        const int d = param.record.split_dim;
        const Tensor& full = fulls.at(param.record.name);
        shard.push_back({param.record.name,
                         d == kReplicated ? full : nn::shard(full, d, t, tp, param.record.name),
                         d});
      }
      write_shard(dir, step, t, p, shard);
    }
  }
}

void save(const std::filesystem::path& dir, std::int64_t step, int tp, int pp,
          const std::vector<FakeParameter>& model, const Fulls& fulls) {
  write_all_shards(dir, step, tp, pp, model, fulls);
  finish_step(dir, step, meta_of(tp, pp));
}

void expect_same(const Fulls& actual, const Fulls& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (const auto& [name, tensor] : expected) {
    ASSERT_TRUE(actual.count(name)) << name;
    EXPECT_EQ(actual.at(name).shape(), tensor.shape()) << name;
    EXPECT_EQ(actual.at(name).dtype(), tensor.dtype()) << name;
    EXPECT_EQ(actual.at(name).to_vector(), tensor.to_vector()) << name;
  }
}

class Checkpoint : public test::ScratchDirTest {
 protected:
  std::vector<FakeParameter> model = fake_model();
  Fulls fulls = known_fulls(model);

  /// The CheckpointError message of loading `records` from `step`.
  std::string load_error(std::int64_t step, const std::vector<TensorRecord>& records) {
    return message_of<CheckpointError>([&] { load_full_tensors(dir, step, records); });
  }
};

TEST_F(Checkpoint, RebuildsExactFullTensorsAcrossLayouts) {
  // Each step is saved from the previous step's reloaded tensors: (2,2) -> (1,1) -> (4,1) ->
  // (1,3) -> (4,2) -> (2,1); every reload equals the original full tensors exactly.
  const int layouts[][2] = {{2, 2}, {1, 1}, {4, 1}, {1, 3}, {4, 2}, {2, 1}};
  Fulls current = fulls;
  std::int64_t step = 10;
  for (const auto& [tp, pp] : layouts) {
    save(dir, step, tp, pp, model, current);
    EXPECT_EQ(latest_step(dir), step);
    current = load_full_tensors(dir, step, records_of(model));
    expect_same(current, fulls);
    step += 10;
  }
  // The (2,2) files hold the slices: q [4, 6] cut along dim 0, proj [6, 4] along dim 1.
  SafetensorsReader shard = open_shard(dir, 10, 1, 0);
  EXPECT_EQ(shard.find("h.0.q.weight")->shape, (Shape{2, 6}));
  EXPECT_EQ(shard.find("h.0.proj.weight")->shape, (Shape{6, 2}));
  EXPECT_EQ(shard.read_tensor("h.0.q.weight").to_vector(),
            nn::shard(fulls["h.0.q.weight"], 0, 1, 2, "q").to_vector());
  EXPECT_EQ(saved_split_dim(shard, "h.0.proj.weight"), 1);
  EXPECT_EQ(saved_split_dim(shard, "h.0.proj.bias"), kReplicated);
  EXPECT_EQ(shard.find("h.1.q.weight"), nullptr);
}

TEST_F(Checkpoint, MetaJsonRoundTrips) {
  save(dir, 3, 2, 1, model, fulls);
  EXPECT_EQ(read_meta(dir, 3), meta_of(2, 1));
  EXPECT_EQ(test::file_bytes(dir / "latest"), "step_3\n");
}

TEST_F(Checkpoint, FullRecordMultipliesTheSplitDim) {
  const Parameter column{"q", Tensor::zeros({2, 6}, DType::f64), 0, false};
  const TensorRecord record = full_record(column, 4);
  EXPECT_EQ(record.full_shape, (Shape{8, 6}));
  EXPECT_EQ(record.dtype, DType::f64);
  EXPECT_EQ(full_record({"b", Tensor::zeros({6}), kReplicated, false}, 4).full_shape, Shape{6});
  EXPECT_THROW(full_record({"b", Tensor::zeros({6}), 1, false}, 2), std::invalid_argument);
}

TEST_F(Checkpoint, IncompleteStepsAreNeverLoaded) {
  EXPECT_EQ(latest_step(dir / "nonexistent"), std::nullopt);
  EXPECT_EQ(latest_step(dir), std::nullopt);
  save(dir, 1, 2, 2, model, fulls);
  std::map<std::string, std::string> step1;
  for (const auto& e : std::filesystem::directory_iterator(dir / "step_1")) {
    step1[e.path().filename().string()] = test::file_bytes(e.path());
  }

  // A crash after writing step 2's shards, before finish_step.
  write_all_shards(dir, 2, 2, 2, model, fulls);
  EXPECT_FALSE(step_complete(dir, 2));
  EXPECT_EQ(latest_step(dir), 1);
  EXPECT_THAT(load_error(2, records_of(model)),
              names("step_2: incomplete checkpoint (no DONE marker)"));
  finish_step(dir, 2, meta_of(2, 2));
  EXPECT_EQ(latest_step(dir), 2);

  // Saving step 2 again: the first rewritten shard withdraws DONE; latest (still naming step 2)
  // falls back to step 1 until the save finishes.
  write_shard(dir, 2, 0, 0, {});
  EXPECT_FALSE(step_complete(dir, 2));
  EXPECT_EQ(test::file_bytes(dir / "latest"), "step_2\n");
  EXPECT_EQ(latest_step(dir), 1);

  // Step 1 was never touched.
  for (const auto& [name, bytes] : step1)
    EXPECT_EQ(test::file_bytes(dir / "step_1" / name), bytes) << name;
  expect_same(load_full_tensors(dir, 1, records_of(model)), fulls);
}

TEST_F(Checkpoint, LatestFallsBackToTheNewestCompleteStep) {
  save(dir, 4, 1, 1, model, fulls);
  save(dir, 12, 1, 1, model, fulls);
  save(dir, 8, 1, 1, model, fulls);  // latest names the most recently finished step
  EXPECT_EQ(latest_step(dir), 8);
  std::filesystem::remove(dir / "latest");
  EXPECT_EQ(latest_step(dir), 12);
  test::put_file_bytes(dir / "latest", "garbage");
  EXPECT_EQ(latest_step(dir), 12);
  std::filesystem::remove(dir / "step_12" / "DONE");
  std::filesystem::create_directories(dir / "step_99");  // a crash before any shard was written
  EXPECT_EQ(latest_step(dir), 8);
}

// A run resumed from step 4 of a run that had reached step 12 saves steps 5 and 6: latest names
// 6. Should step 6 not load, or be saved again, the fallback is step 5 of the same history, not
// the abandoned run's step 12.
TEST_F(Checkpoint, TheFallbackStaysInTheHistoryLatestNames) {
  for (const std::int64_t step : {4, 12, 5, 6})
    save(dir, step, 1, 1, model, fulls);
  EXPECT_EQ(latest_step(dir), 6);
  EXPECT_EQ(complete_steps(dir), (std::vector<std::int64_t>{6, 5, 4}));
  std::filesystem::remove(dir / "step_6" / "DONE");
  EXPECT_EQ(latest_step(dir), 5);
  EXPECT_EQ(complete_steps(dir), (std::vector<std::int64_t>{5, 4}));
  for (const char* step : {"step_5", "step_4"})
    std::filesystem::remove(dir / step / "DONE");
  EXPECT_EQ(latest_step(dir), std::nullopt);
  EXPECT_EQ(no_complete_step_message(dir),
            (dir / "step_6").string() +
                ": incomplete checkpoint (no DONE marker), and no other step is complete (" +
                (dir / "step_12").string() + " above it is from a run resumed before it: --load " +
                (dir / "step_12").string() + " takes it)");
  std::filesystem::remove(dir / "latest");  // no history named: the highest complete step
  EXPECT_EQ(latest_step(dir), 12);
}

// A folder names its newest complete step; a step folder names itself (with or without a
// trailing separator), so an older step can be loaded, but only when it is complete.
TEST_F(Checkpoint, LocateStepTakesAFolderOrOneOfItsSteps) {
  save(dir, 4, 1, 1, model, fulls);
  save(dir, 8, 1, 1, model, fulls);
  const auto expect_location = [&](const std::filesystem::path& path, std::int64_t step) {
    const std::optional<StepLocation> location = locate_step(path);
    ASSERT_TRUE(location.has_value()) << path;
    EXPECT_EQ(location->dir, dir) << path;
    EXPECT_EQ(location->step, step) << path;
  };
  expect_location(dir, 8);
  expect_location(dir / "step_4", 4);
  expect_location(dir / "step_4" / "", 4);
  std::filesystem::remove(dir / "step_4" / "DONE");
  EXPECT_EQ(locate_step(dir / "step_4"), std::nullopt);
  EXPECT_EQ(no_complete_step_message(dir / "step_4"),
            (dir / "step_4").string() + ": incomplete checkpoint (no DONE marker)");
}

TEST_F(Checkpoint, NoCompleteStepIsExplained) {
  EXPECT_EQ(no_complete_step_message(dir / "nonexistent"),
            (dir / "nonexistent").string() + ": no such checkpoint folder");
  test::put_file_bytes(dir / "file", "x");
  EXPECT_EQ(no_complete_step_message(dir / "file"), (dir / "file").string() + ": not a folder");
  EXPECT_EQ(no_complete_step_message(dir),
            dir.string() + ": no checkpoint step (no step_<k> folder)");
  write_all_shards(dir, 10, 1, 1, model, fulls);
  write_all_shards(dir, 9, 1, 1, model, fulls);
  test::put_file_bytes(dir / "step_11", "not a folder");
  EXPECT_EQ(no_complete_step_message(dir),
            (dir / "step_10").string() +
                ": incomplete checkpoint (no DONE marker), and no other step is complete");
}

TEST_F(Checkpoint, SavingAgainReplacesAPartialStepOfAnotherLayout) {
  // A crash while step 3 was saved at tp 4: two of four shards and a writer's temporary file.
  write_shard(dir, 3, 0, 0, {{"stale", Tensor::zeros({2})}});
  write_shard(dir, 3, 3, 0, {{"stale", Tensor::zeros({2})}});
  test::put_file_bytes(dir / "step_3" / ".shard_tp1_pp0.safetensors.tmp.123.0", "partial");
  save(dir, 3, 2, 1, model, fulls);
  std::set<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir / "step_3")) {
    names.insert(e.path().filename().string());
  }
  EXPECT_EQ(names, (std::set<std::string>{"DONE", "meta.json", "shard_tp0_pp0.safetensors",
                                          "shard_tp1_pp0.safetensors"}));
  expect_same(load_full_tensors(dir, 3, records_of(model)), fulls);
}

TEST_F(Checkpoint, SavingAnyStepRemovesTheTemporaryFilesOfInterruptedSaves) {
  // Crashes while step 3 and DIR/latest were written; then step 4 is saved.
  save(dir, 3, 1, 1, model, fulls);
  const std::filesystem::path leftovers[] = {
      dir / "step_3" / ".shard_tp0_pp0.safetensors.tmp.123.0", dir / ".latest.tmp.77.1"};
  for (const std::filesystem::path& leftover : leftovers)
    test::put_file_bytes(leftover, "partial");
  save(dir, 4, 1, 1, model, fulls);
  for (const std::filesystem::path& leftover : leftovers)
    EXPECT_FALSE(std::filesystem::exists(leftover)) << leftover;
  expect_same(load_full_tensors(dir, 3, records_of(model)), fulls);  // step 3 itself is intact
}

// --load of a folder takes its newest step that loads and names the newer ones it skipped.
TEST_F(Checkpoint, AFolderLoadsItsNewestStepThatLoads) {
  std::filesystem::copy(std::filesystem::path(MPITRON_TEST_DATA_DIR) / "checkpoint_tiny", dir,
                        std::filesystem::copy_options::recursive);
  // A newer, complete step whose shard is damaged, named by latest.
  std::filesystem::copy(dir / "step_1000", dir / "step_2000",
                        std::filesystem::copy_options::recursive);
  test::put_file_bytes(dir / "step_2000" / "shard_tp1_pp0.safetensors", "garbage");
  test::put_file_bytes(dir / "latest", "step_2000\n");
  const GptCheckpoint loaded = load_gpt_checkpoint(dir, /*with_moments=*/false);
  EXPECT_EQ(loaded.step, 1000);
  ASSERT_EQ(loaded.skipped.size(), 1u);
  EXPECT_NE(loaded.skipped[0].find((dir / "step_2000").string()), std::string::npos)
      << loaded.skipped[0];
  // Naming the damaged step itself loads nothing else; with no step left the newest reason.
  EXPECT_THROW(load_gpt_checkpoint(dir / "step_2000", false), CheckpointError);
  test::put_file_bytes(dir / "step_1000" / "shard_tp0_pp0.safetensors", "garbage");
  const std::string message = message_of<CheckpointError>([&] { load_gpt_checkpoint(dir, false); });
  EXPECT_NE(message.find("step_2000"), std::string::npos) << message;
  EXPECT_NE(message.find("and the 1 older complete steps do not load either"), std::string::npos)
      << message;
}

// A latest that names a step without DONE (being saved again, or removed), or no step at all, is
// passed over for the newest complete step below it, and named with why.
TEST_F(Checkpoint, AFolderNamesTheLatestItPassesOver) {
  std::filesystem::copy(std::filesystem::path(MPITRON_TEST_DATA_DIR) / "checkpoint_tiny", dir,
                        std::filesystem::copy_options::recursive);
  test::put_file_bytes(dir / "latest", "step_99999\n");
  const GptCheckpoint loaded = load_gpt_checkpoint(dir, /*with_moments=*/false);
  EXPECT_EQ(loaded.step, 1000);
  ASSERT_EQ(loaded.skipped.size(), 1u);
  EXPECT_EQ(loaded.skipped[0],
            fmt::format("{}, which {} names, is not complete (no DONE file: "
                        "being saved, or removed)",
                        (dir / "step_99999").string(), (dir / "latest").string()));
  // A latest that names the step loaded adds nothing.
  test::put_file_bytes(dir / "latest", "step_1000\n");
  EXPECT_TRUE(load_gpt_checkpoint(dir, false).skipped.empty());
  // One that names no step (empty, or junk) is named too, its text escaped and cut at 40.
  const std::pair<std::string, std::string> junk[] = {
      {"", "\"\""},
      {"step_x\n", "\"step_x\""},
      {std::string(50, 'a') + "\n", "\"" + std::string(40, 'a') + "\"..."},
      {"step_1\tjunk", "\"step_1\\tjunk\""}};
  for (const auto& [text, shown] : junk) {
    test::put_file_bytes(dir / "latest", text);
    const GptCheckpoint named = load_gpt_checkpoint(dir, false);
    EXPECT_EQ(named.step, 1000);
    ASSERT_EQ(named.skipped.size(), 1u);
    EXPECT_EQ(named.skipped[0], fmt::format("{} holds {}, not a step's name (step_<k>)",
                                            (dir / "latest").string(), shown));
  }
}

TEST_F(Checkpoint, MissingAndDamagedFilesAreNamed) {
  save(dir, 5, 2, 2, model, fulls);
  const std::filesystem::path shard = shard_path(dir, 5, 1, 1);
  const std::string bytes = test::file_bytes(shard);
  test::put_file_bytes(shard, bytes.substr(0, bytes.size() - 4));
  EXPECT_THAT(load_error(5, records_of(model)), names(shard.string(), ": short data: tensor '"));
  std::filesystem::remove(shard);
  EXPECT_THAT(load_error(5, records_of(model)), names(shard.string(), ": missing shard file"));

  // Another shard's file under this name.
  std::filesystem::copy_file(shard_path(dir, 5, 0, 1), shard);
  EXPECT_THAT(load_error(5, records_of(model)),
              names(shard.string(), "metadata tp_rank is '0', expected 1"));

  // finish_step refuses a step with a missing shard and writes no DONE.
  write_all_shards(dir, 6, 2, 1, model, fulls);
  std::filesystem::remove(shard_path(dir, 6, 1, 0));
  EXPECT_THAT(message_of<CheckpointError>([&] { finish_step(dir, 6, meta_of(2, 1)); }),
              names(shard_path(dir, 6, 1, 0).string(), "missing shard file"));
  EXPECT_FALSE(step_complete(dir, 6));
  EXPECT_THROW(finish_step(dir, 6, {{"seed", 1}}), std::invalid_argument);

  std::filesystem::remove(dir / "step_5" / "meta.json");
  EXPECT_THAT(load_error(5, records_of(model)), names("step_5/meta.json: missing"));
  test::put_file_bytes(dir / "step_5" / "meta.json", R"({"topology": {"tp": 2}})");
  EXPECT_THAT(load_error(5, records_of(model)),
              names("meta.json: has topology {\"tp\":2} without a positive integer \"pp\""));
}

TEST_F(Checkpoint, MismatchedRecordsAreNamed) {
  save(dir, 7, 2, 2, model, fulls);
  const std::string stage0_tp0 = shard_path(dir, 7, 0, 0).string();
  auto wanted = [&](const std::string& name, int split_dim, Shape shape, DType dtype) {
    return std::vector<TensorRecord>{{name, split_dim, std::move(shape), dtype}};
  };
  EXPECT_THAT(load_error(7, wanted("nope", 0, {4}, DType::f32)),
              names("step_7: no tensor 'nope' in the tp rank 0 shard file of any of the 2 pp "
                    "stages"));
  EXPECT_THAT(load_error(7, wanted("h.0.q.weight", 0, {8, 6}, DType::f32)),
              names(stage0_tp0,
                    "tensor 'h.0.q.weight' has shape [2, 6] but the model wants "
                    "[4, 6] (full shape [8, 6] over tp 2)"));
  EXPECT_THAT(load_error(7, wanted("h.0.proj.bias", kReplicated, {7}, DType::f32)),
              names(stage0_tp0, "tensor 'h.0.proj.bias' has shape [6] but the model wants [7]"));
  EXPECT_THAT(load_error(7, wanted("h.0.q.weight", 0, {4, 6}, DType::f64)),
              names(stage0_tp0, "tensor 'h.0.q.weight' is F32 but the model wants F64"));
  EXPECT_THAT(load_error(7, wanted("h.0.q.weight", 1, {4, 6}, DType::f32)),
              names(stage0_tp0,
                    "tensor 'h.0.q.weight' was saved split along dim 0 but the "
                    "model wants it split along dim 1"));
  EXPECT_THAT(load_error(7, wanted("h.0.q.weight", 0, {5, 6}, DType::f32)),
              names("the wanted full shape [5, 6] cannot be cut into the saved tp 2 slices"));
  EXPECT_THROW(load_full_tensors(dir, 7, wanted("h.0.q.weight", 2, {4, 6}, DType::f32)),
               std::invalid_argument);

  // The last stage's tied copy of the embedding differs from the first stage's.
  Fulls other = fulls;
  other["wte.weight"] = Tensor::zeros({8, 6});
  write_all_shards(dir, 8, 1, 2, model, fulls);
  write_shard(dir, 8, 0, 1, {{"wte.weight", other["wte.weight"], 0}});
  finish_step(dir, 8, meta_of(1, 2));
  EXPECT_THAT(load_error(8, wanted("wte.weight", 0, {8, 6}, DType::f32)),
              names(shard_path(dir, 8, 0, 1).string(),
                    "tensor 'wte.weight' differs from its tied copy in " +
                        shard_path(dir, 8, 0, 0).string()));
}

}  // namespace
}  // namespace mpitron::nn
