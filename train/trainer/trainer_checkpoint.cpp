// What a Trainer's checkpoint holds and what a resume checks (the loop is train/trainer/trainer.cpp).
#include "train/trainer/trainer.h"

#include <charconv>
#include <cstdlib>
#include <optional>

#include "core/base/error.h"

namespace relgrad {
namespace {
// A number of the saved GradScaler state, the whole text or an error naming the key.
template <class T>
T parse_scaler_number(const std::string& text, const char* key, const std::string& path) {
  T v{};
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  RG_CHECK(ec == std::errc() && end == text.data() + text.size(), "train", "cannot resume from ", path,
           ": extra.", key, " is '", text, "', not a number");
  return v;
}
}  // namespace

void Trainer::resume(const std::string& path) { resume(load_checkpoint(path), path); }

void Trainer::resume(const Checkpoint& ck, const std::string& path) {
  if (options_.check_resume) options_.check_resume(ck.meta.config_json, path);
  RG_CHECK(ck.optimizer_name == optimizer_->name(), "train", "cannot resume from ", path, ": it holds '",
           ck.optimizer_name, "' state, this run uses ", optimizer_->name());
  RG_CHECK(ck.meta.step <= options_.train.steps, "train", "cannot resume from ", path, ": it is at step ",
           ck.meta.step, ", beyond train.steps = ", options_.train.steps);
  if (std::optional<uint64_t> sum = options_.data->checksum()) {
    auto it = ck.meta.extra.find("data_checksum");
    std::string here = std::to_string(*sum);
    RG_CHECK(it == ck.meta.extra.end() || it->second == here, "train", "cannot resume from ", path,
             ": it was trained on a different ", options_.data->path(), " (checksum ", it->second, " vs ", here, ")");
  }
  if (scaler_) {  // fp16: the loss scale where the saved run left it (absent: a run saved before it had one)
    auto scale = ck.meta.extra.find("grad_scale"), tracker = ck.meta.extra.find("grad_scale_growth_tracker");
    if (scale != ck.meta.extra.end() && tracker != ck.meta.extra.end())
      scaler_->load_state(parse_scaler_number<double>(scale->second, "grad_scale", path),
                          parse_scaler_number<int64_t>(tracker->second, "grad_scale_growth_tracker", path));
  }
  restore(ck, *model_->module, optimizer_.get(), &default_generator());
  run_dir_.set_resumed_from(path);
  step_ = ck.meta.step;
  data_position_ = ck.meta.data_position;
  auto seen = ck.meta.extra.find("tokens_seen");
  tokens_seen_ = seen == ck.meta.extra.end() ? 0 : std::atoll(seen->second.c_str());
  if (reducer_)  // every rank read its own copy of the file: they must agree
    check_same(*comm_, parameters_checksum(model_->module->parameters()) ^ uint64_t(step_) ^ (uint64_t(data_position_) << 32),
               "the checkpoint " + path + " (weights, step, data position)");
}

void Trainer::save(const std::string& path) const {
  CheckpointMeta meta;
  meta.step = step_;
  meta.config_json = options_.config_json;
  meta.rng_seed = default_generator().seed();
  meta.rng_offset = default_generator().offset();
  meta.data_position = data_position_;
  meta.num_threads = threads_->threads_for_next_step();  // for the record: results do not depend on it
  if (std::optional<uint64_t> sum = options_.data->checksum()) meta.extra["data_checksum"] = std::to_string(*sum);
  meta.extra["tokens_seen"] = std::to_string(tokens_seen_);
  if (!options_.vocab_json.empty()) meta.extra["vocab"] = options_.vocab_json;
  if (scaler_) {  // the shortest text that reads back as the same double: a resume continues bit for bit
    char buf[32];
    auto end = std::to_chars(buf, buf + sizeof buf, scaler_->get_scale()).ptr;
    meta.extra["grad_scale"] = std::string(buf, end);
    meta.extra["grad_scale_growth_tracker"] = std::to_string(scaler_->growth_tracker());
  }
  save_checkpoint(path, *model_->module, optimizer_.get(), meta);
}

}  // namespace relgrad
