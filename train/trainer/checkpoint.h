// Training checkpoints: everything needed to resume a run bit-identically, in one safetensors file
// (docs/checkpoint-format.md; docs/reliability.md for the atomic writes).
//
//   CheckpointMeta meta;  meta.step = step; meta.config_json = ...; meta.data_position = pos;
//   meta.rng_seed = default_generator().seed(); meta.rng_offset = default_generator().offset();
//   save_checkpoint("run/ckpt.safetensors", model, &optimizer, meta);
//   ...
//   Checkpoint ckpt = load_checkpoint("run/ckpt.safetensors");   // verified, nothing applied yet
//   restore(ckpt, model, &optimizer, &default_generator());       // step = ckpt.meta.step, ...
//
// The file layout (tensors "model.<name>" and "optim.<name>", the metadata keys) and the definitions
// of "checksum" (FNV-1a 64 of the data section) and "header_checksum" (FNV-1a 64 of what the header
// says: keys, values, tensor names, dtypes, shapes) are specified once, in docs/checkpoint-format.md,
// 1.1 to 1.3. Every FNV multiply is by an odd number (a bijection mod 2^64), so a change of any single
// byte always changes the checksum.
//
// Why a checksum at all: safetensors only checks that the layout is consistent; a flipped bit in a
// weight (bad disk, torn copy between machines) would otherwise load silently and poison the run.
//
// Saving is atomic (save_safetensors: temp file, fsync, rename), so a crash or error mid-save leaves
// the previous checkpoint under `path` intact. A crash leaves "<path>.tmp.<pid>.<n>" behind; it is
// never read (loaders open `path` only) and the next save_checkpoint to `path` removes it once its
// writer is gone (remove_stale_temps, core/file_io.h). All errors are relgrad::Error("[checkpoint] <path>: ...").
#pragma once
#include <cstdint>
#include <map>
#include <string>

#include "core/file_io.h"  // fnv1a64
#include "core/rng.h"
#include "layers/module.h"
#include "train/optim/optim.h"

namespace relgrad {

inline constexpr int64_t kCheckpointFormatVersion = 1;

struct CheckpointMeta {
  int64_t format_version = kCheckpointFormatVersion;  // save_checkpoint writes only the current one
  int64_t step = 0;            // optimizer steps done (the next step to run)
  std::string config_json;     // the model/run config, opaque here
  uint64_t rng_seed = 0, rng_offset = 0;  // the Generator driving dropout etc. (Generator::set_state)
  int64_t data_position = 0;   // where the data stream resumes (batches or tokens consumed: caller's unit)
  int64_t num_threads = 0;     // threads the run used; recorded so a resume can use the same (0: unknown)
  std::map<std::string, std::string> extra;  // anything else, stored as "extra.<key>"
  // Loaded: "relgrad <version>" of the program that saved the file ("" in files from before the
  // field). Saving ignores it and writes this library's version (core/version.h).
  std::string writer;
};

// A verified checkpoint, not yet applied. Tensor names lack their "model." / "optim." prefix.
struct Checkpoint {
  std::string path;
  CheckpointMeta meta;
  std::string optimizer_name;             // "" when saved without an optimizer
  std::map<std::string, Tensor> model;      // CPU tensors, as saved
  std::map<std::string, Tensor> optimizer;  // empty when saved without an optimizer
};

// The checksum (docs/checkpoint-format.md, 1.3), over `tensors` (any device) in the map's ascending name order, and its
// 16-digit lowercase hex form as stored in the metadata.
uint64_t checkpoint_checksum(const std::map<std::string, Tensor>& tensors);
std::string checksum_hex(uint64_t checksum);
// The header checksum (docs/checkpoint-format.md, 1.3), of a file's metadata (its "header_checksum" entry is skipped)
// and tensors (only names, dtypes and shapes are read).
uint64_t checkpoint_header_checksum(const std::map<std::string, std::string>& metadata,
                                    const std::map<std::string, Tensor>& tensors);

// Writes model (and optimizer, when non-null) state and meta to `path` atomically. The state is
// copied to the host first, so the optimizer may step again as soon as this returns.
void save_checkpoint(const std::string& path, const Module& model, const Optimizer* optimizer,
                     const CheckpointMeta& meta);

// Reads and verifies `path`: the safetensors structure, format_version (unknown versions are refused),
// every metadata value, the tensor names and the checksum, before returning anything.
Checkpoint load_checkpoint(const std::string& path);

// Applies a checkpoint: model through load_state_dict (strict), optimizer (when non-null) through
// load_state_tensors, rng (when non-null) through set_state. Everything is checked before the rng is
// touched, and if the optimizer's state is refused the model's previous values are put back, so an
// error leaves all three as they were. Data position, step and threads are the caller's to apply.
void restore(const Checkpoint& checkpoint, Module& model, Optimizer* optimizer, Generator* rng);

}  // namespace relgrad
