// The one check every `relgrad` subcommand that writes a file makes before it reads or writes anything:
// none of its outputs is one of its inputs. Files are compared by device and inode (stat), not by
// spelling, so `./C`, `dir/../C`, a hard link and a symbolic link to an input are all that input.
//
//   refuse_output_over_input("eval", {{"the checkpoint", a.checkpoint}}, {{"--dump-logits", a.dump_path}});
#pragma once
#include <string>
#include <vector>

namespace relgrad::cli_detail {

// A file a command reads or writes, and how the user named it: an option ("--dump-logits") or an
// argument ("the checkpoint").
struct NamedPath {
  std::string name;
  std::string path;
};

// Throws UsageError (exit 2) naming both when an output (a file, or a folder the command writes into)
// is the same file as an input: "[eval] --dump-logits ./C is the same file as the checkpoint C: writing
// it would destroy that input; choose another path for --dump-logits". Empty paths and outputs that
// do not exist yet are skipped (a file that does not exist cannot be an input).
void refuse_output_over_input(const std::string& command, const std::vector<NamedPath>& inputs,
                              const std::vector<NamedPath>& outputs);

}  // namespace relgrad::cli_detail
