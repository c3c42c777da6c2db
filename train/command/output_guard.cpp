// Outputs that are inputs, by device and inode (train/command/output_guard.h).
#include "train/command/output_guard.h"

#include <sys/stat.h>

#include "train/command/cli_commands.h"

namespace relgrad::cli_detail {

void refuse_output_over_input(const std::string& command, const std::vector<NamedPath>& inputs,
                              const std::vector<NamedPath>& outputs) {
  for (const NamedPath& output : outputs) {
    struct stat out {};
    // stat follows symbolic links: a link to an input is that input.
    if (output.path.empty() || ::stat(output.path.c_str(), &out) != 0) continue;
    for (const NamedPath& input : inputs) {
      struct stat in {};
      // Files written into a folder that is read (data.music_dir as train.out_dir) destroy nothing.
      if (input.path.empty() || ::stat(input.path.c_str(), &in) != 0 || S_ISDIR(in.st_mode)) continue;
      if (in.st_dev == out.st_dev && in.st_ino == out.st_ino)
        throw UsageError("[" + command + "] " + output.name + " " + output.path + " is the same file as " +
                         input.name + " " + input.path + ": writing it would destroy that input; choose " +
                         "another path for " + output.name);
    }
  }
}

}  // namespace relgrad::cli_detail
