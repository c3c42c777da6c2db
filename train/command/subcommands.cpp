// The table of `relgrad` subcommands (train/command/subcommand.h): one line per command.
#include "train/command/subcommand.h"
#include "train/instruments/study_registry.h"

#include <algorithm>

namespace relgrad::cli_detail {

std::vector<SubcommandEntry> subcommands() {
  std::vector<SubcommandEntry> table = {
      {"train", "train a model; --key=value overrides any config key",
       "[--config FILE.toml|.json] [--resume CHECKPOINT] [--key=value ...] [--device cpu|cuda]\n"
       "[--dry-run] [--help-config]",
       make_train_command},
      {"sample", "generate from a checkpoint",
       "CHECKPOINT [--input \"4 1 7\" | --prompt TEXT | --prompt-midi F.mid | --chorale N | --melody F.mid]\n"
       "[--num N] [--max-new-tokens N] [--temperature T] [--top-k K] [--top-p P] [--seed S]\n"
       "[--format text|midi] [-o OUT.mid] [--window N|none] [--device cpu|cuda|cuda:N] [--tf32]",
       make_sample_command},
      {"eval", "held-out loss and accuracy of a checkpoint, or dump logits",
       "CHECKPOINT [--batches N] [--window C] [--dump-logits FILE [--input \"...\"] [--target \"...\"]]\n"
       "[--data.KEY=VALUE ...] [--device cpu|cuda|cuda:N] [--tf32]",
       make_eval_command},
      {"inspect", "header, config, step, tensor table and checksum verdict", "CHECKPOINT", make_inspect_command},
      {"render", "render a .mid file to .wav with FluidSynth (when installed)",
       "FILE.mid [-o OUT.wav] [--soundfont FILE.sf2]", make_render_command},
      {"probe", "what each layer and head does with relative position",
       "CHECKPOINT [--reach R] [--out DIR] [--delta D ...] [--queries RANGE] [--compare CHECKPOINT]\n"
       "[--batch N] [--csv F] [--json F] [--compare-csv F]",
       make_probe_command},
      {"experiments", "the verification experiments (D1 D2 D3 D6): train, probe, report",
       "[--full] [--only D1|D2|D3|D6] [--sweep] [--out FILE.md] [--seeds 1,2,3] [per-run overrides]",
       make_experiments_command},
  };
  // The studies' commands, one per registry entry (train/command/subcommands/bench.cpp declares each).
  for (const StudyEntry& study : studies()) {
    const std::string synopsis =
        study.synopsis.empty() ? "[--full] [--tasks a,b] [--treatments a,b] [--seeds 1,2] [--steps N] [--out DIR]"
                               : study.synopsis;
    table.push_back({study.name, study.summary, synopsis, [study] { return make_study_command(study); }});
  }
  table.insert(table.end(), {
      {"bench", "any registered study by name: the benches above and those registered from outside",
       "NAME [--full] [--tasks a,b] [--treatments none,t5,...] [--seeds 1,2] [--steps N] [--out DIR]",
       make_bench_command},
      {"tokenize", "a file's bytes as a token data file (vocab 256) for data.source = \"tokens\"",
       "INPUT OUTPUT", make_tokenize_command},
      {"plot", "loss curves from a training log, as SVG or PNG", "LOG [-o OUT.svg|OUT.png]", make_plot_command},
  });
  return table;
}

namespace {

// One command's synopsis, its name padded to `width` and its continuation lines under the arguments.
std::string synopsis_line(const SubcommandEntry& c, size_t width) {
  const size_t name = c.name.size();
  const std::string head = "  relgrad " + c.name + std::string(width > name ? width - name + 1 : 1, ' ');
  const std::string indent(head.size() + 2, ' ');
  std::string line = head;
  for (const char ch : c.synopsis) line += ch == '\n' ? "\n" + indent : std::string(1, ch);
  return line + "\n";
}

}  // namespace

std::string synopsis_text() {
  size_t width = 0;
  for (const SubcommandEntry& c : subcommands()) width = std::max(width, c.name.size());
  std::string text;
  for (const SubcommandEntry& c : subcommands()) text += synopsis_line(c, width);
  return text + "  relgrad --version\n";
}

std::string synopsis_text(const SubcommandEntry& command) { return synopsis_line(command, 0); }

std::string command_names_text() {
  std::string text;
  for (const SubcommandEntry& c : subcommands()) text += (text.empty() ? "" : ", ") + c.name;
  return text;
}

}  // namespace relgrad::cli_detail
