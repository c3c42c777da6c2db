// The `relgrad` command: the CLI11 parser built from the table of subcommands (train/command/subcommand.h),
// dispatch to the one that parsed, and the one-line error report with its exit code (cli.h: the contract).
#include "train/command/cli.h"

#include <CLI/CLI.hpp>
#include <dlfcn.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <ostream>
#include <sstream>
#include <vector>

#include "core/allocator.h"
#include "core/base/error.h"
#include "core/cpu/gemm_library.h"
#include "core/cpu/matmul.h"
#include "core/device.h"
#include "train/command/cli_commands.h"
#include "train/command/subcommand.h"
#include "train/config/config_fields.h"
#include "train/instruments/study_registry.h"
#include "train/trainer/distributed.h"
#include "train/trainer/nonfinite.h"

namespace relgrad {
using namespace cli_detail;  // UsageError, the subcommand table

namespace {

// `relgrad --version`: the project's version (CMakeLists.txt), what this binary was built with, and
// the processor, GEMM kernels and malloc it runs on here (bench/run_train.sh records them beside PyTorch's).
// The GEMM library the CPU's products use, how it was chosen, and the measured rates
// (core/cpu/gemm_library.h): "OpenBLAS 0.3.21 …, core: Zen (measured, cached in …; GFLOP/s: eigen 151,
// openblas 224)".
std::string gemm_text() {
  const cpu::GemmChoice& choice = cpu::gemm_choice();
  const cpu::GemmLibrary library = cpu::gemm_library();
  std::string text = cpu::gemm_library_kernel(library) + " (" +
                     (library == choice.library ? choice.how : std::string("set by cpu::set_gemm_library"));
  for (size_t i = 0; i < choice.rates.size(); ++i)
    text += (i ? ", " : "; GFLOP/s: ") + std::string(cpu::gemm_library_name(choice.rates[i].library)) + " " +
            std::to_string(static_cast<int>(choice.rates[i].gflops + 0.5));
  return text + ")";
}

// The malloc this process runs on, looked up rather than assumed: tcmalloc where the programs built
// here link it (CMakeLists.txt, RELGRAD_TCMALLOC) or it is preloaded, else the C library's.
std::string malloc_text() {
  using TcVersion = const char* (*)(int*, int*, const char**);
  if (const auto tc_version = reinterpret_cast<TcVersion>(dlsym(RTLD_DEFAULT, "tc_version"))) {
    int major = 0, minor = 0;
    const char* patch = nullptr;
    return std::string("tcmalloc (") + tc_version(&major, &minor, &patch) + ")";
  }
  if (dlsym(RTLD_DEFAULT, "mallctl")) return "jemalloc";
  return "the C library's";
}

std::string version_text() {
#ifndef RELGRAD_VERSION
#define RELGRAD_VERSION "unknown"
#endif
#ifndef RELGRAD_BUILD_TYPE
#define RELGRAD_BUILD_TYPE "unknown"
#endif
  auto yes = [](bool built) { return built ? "yes" : "no"; };
  return std::string("relgrad ") + RELGRAD_VERSION + "\nbuild type: " + RELGRAD_BUILD_TYPE +
         "\nCUDA: " + yes(cuda_built()) + "\nMPI: " + yes(mpi_built()) + "\nNCCL: " + yes(nccl_built()) +
         "\nCPU: " + cpu::cpu_model_name() + "\nGEMM: " + gemm_text() + "\nmalloc: " + malloc_text();
}

// " (did you mean 'train'?)" for a command two edits or fewer from a known one, else "".
std::string command_hint(const std::string& typed) {
  std::string best;
  size_t best_d = 3;
  for (const SubcommandEntry& entry : subcommands()) {
    const size_t d = config_detail::edit_distance(typed, entry.name, true);  // "trian" is 1 from "train"
    if (d < best_d && d < std::string(entry.name).size() / 2 + 1) best_d = d, best = entry.name;
  }
  return best.empty() ? "" : " (did you mean '" + best + "'?)";
}

// A value refused by an option's check is reported by CLI11 under one of the option's names ("--num:")
// whichever the user typed: the spellings the command line holds instead ("-n: 0 is not in [1, 1000]").
std::string as_typed(const CLI::ValidationError& e, const CLI::App& sub, int argc, const char* const* argv) {
  const std::string what = e.what();
  const size_t colon = what.find(": ");
  if (colon == std::string::npos) return what;
  const CLI::Option* option = sub.get_option_no_throw(what.substr(0, colon));
  if (!option) return what;
  std::vector<std::string> names;
  for (const std::string& n : option->get_snames()) names.push_back("-" + n);
  for (const std::string& n : option->get_lnames()) names.push_back("--" + n);
  std::string typed;
  for (const std::string& n : names)
    for (int i = 1; i < argc; ++i) {
      const std::string arg = argv[i];
      // "-n 0", "-n0", "--num 0", "--num=0"
      const bool short_name = n.size() == 2 && n[1] != '-';
      if (arg == n || (short_name ? arg.rfind(n, 0) == 0 : arg.rfind(n + "=", 0) == 0)) {
        typed += (typed.empty() ? "" : ", ") + n;  // each name once
        break;
      }
    }
  return typed.empty() ? what : typed + what.substr(colon);
}

int run_command(int argc, const char* const* argv, std::ostream& out_all, std::ostream& err,
                std::string& command) {
  // `relgrad bench length-bench ...` is `relgrad length-bench ...`: every study is a command of its own,
  // with its own flags (train/command/subcommands/bench.cpp).
  std::vector<const char*> args(argv, argv + argc);
  if (argc > 2 && std::string(argv[1]) == "bench" && find_study(argv[2])) {
    args.erase(args.begin() + 1);
    argc = static_cast<int>(args.size());
    argv = args.data();
  }
  // Under mpirun only rank 0 prints; errors come from every rank, naming it (docs/distributed.md).
  std::ostream silent(nullptr);
  std::ostream& out = world().is_root() ? out_all : silent;
  const std::string rank_note = world().size() > 1 ? " (" + world().where() + ")" : "";
  CLI::App app{"relgrad: train, sample, evaluate, inspect and plot relative-attention transformers", "relgrad"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "help for every command");
  // The text is made when --version is given (the catch below): making it chooses the GEMM library.
  app.set_version_flag("--version", std::string("relgrad"),
                       "the version, build type and whether CUDA, MPI and NCCL are built in");
  app.footer("Synopsis:\n" + synopsis_text());
  // One parser and one command object per table entry (train/command/subcommands.cpp).
  struct Declared {
    const SubcommandEntry* entry;
    CLI::App* app;
    std::unique_ptr<Subcommand> command;
  };
  std::vector<Declared> declared;
  const std::vector<SubcommandEntry> table = subcommands();  // Declared points into it
  for (const SubcommandEntry& entry : table) {
    Declared d{&entry, app.add_subcommand(entry.name, entry.summary), entry.make()};
    d.app->footer("");  // CLI11 hands down the parent's footer, every command's synopsis: each shows its own
    CommandLine line(*d.app);  // what the command sees of its App
    d.command->declare(line);
    const std::string own = d.app->get_footer();
    d.app->footer((own.empty() ? "" : own + "\n\n") + "Synopsis:\n" + synopsis_text(entry));
    declared.push_back(std::move(d));
  }

  try {
    try {
      app.parse(argc, argv);
    } catch (const CLI::CallForHelp&) {
      out << app.help();
      return 0;
    } catch (const CLI::CallForAllHelp&) {
      out << app.help("", CLI::AppFormatMode::All);
      return 0;
    } catch (const CLI::CallForVersion&) {
      out << version_text() << "\n";
      return 0;
    } catch (const CLI::ParseError& e) {
      for (const CLI::App* sub : app.get_subcommands()) command = "relgrad " + sub->get_name();
      if (command == "relgrad" && argc > 1 && argv[1][0] != '-') {  // CLI11 would only say "A subcommand is required"
        err << "relgrad: error: unknown command '" << argv[1] << "'" << command_hint(argv[1])
            << " (commands: " << command_names_text() << ")\n";
        return 2;
      }
      std::string what = e.what();
      if (const auto* invalid = dynamic_cast<const CLI::ValidationError*>(&e))
        for (const CLI::App* sub : app.get_subcommands()) what = as_typed(*invalid, *sub, argc, argv);
      err << command << ": error: " << what << "\n(run `" << command << " --help`)\n";
      return 2;
    }
    for (Declared& d : declared)
      if (d.app->parsed()) {
        command = std::string("relgrad ") + d.entry->name;
        CommandLine line(*d.app);
        return d.command->run(line, out);
      }
  } catch (...) {
    std::ostringstream message;  // written at once, so that the lines of several ranks do not interleave
    const int code = report_error(command + rank_note, std::current_exception(), message);
    err << message.str() << std::flush;
    return code;
  }
  return 2;
}

}  // namespace

int run_cli(int argc, const char* const* argv, std::ostream& out_all, std::ostream& err) {
  std::string command = "relgrad";
  int code = run_command(argc, argv, out_all, err, command);
  // What a command printed must have reached stdout: `relgrad sample > /dev/full` is an error (exit 1,
  // or the command's own code when it failed already), not a success whose output went nowhere.
  if (world().is_root()) {
    errno = 0;
    out_all.flush();
    if (!out_all) {
      const int why = errno;
      err << command << ": error: [output] could not write to standard output"
          << (why != 0 ? std::string(": ") + std::strerror(why) : std::string()) << "\n";
      if (code == 0) code = 1;
    }
  }
  return code;
}

int report_error(const std::string& command, std::exception_ptr error, std::ostream& err) {
  // What to make smaller, in config keys, when `relgrad train` runs out of memory.
  const std::string oom_hint =
      command.rfind("relgrad train", 0) == 0
          ? " (config keys: data.batch_size, raising train.grad_accum to keep the effective batch; data.context "
            "for text and music; model.d_model, model.d_ff, model.n_encoder_layers, model.n_decoder_layers)"
          : "";
  try {
    std::rethrow_exception(error);
  } catch (const UsageError& e) {
    err << command << ": error: " << e.what() << "\n";
    return 2;
  } catch (const NonFiniteError& e) {
    err << command << ": error: " << e.what() << "\n";
    return 3;
  } catch (const OutOfMemoryError& e) {
    // A message that names its own config key (check_vocabulary_fits) is not given the batch's.
    const bool own_key = std::string(e.what()).find("; config key: ") != std::string::npos;
    err << command << ": error: " << e.what() << (own_key ? "" : oom_hint) << "\n";
    return 4;
  } catch (const std::bad_alloc& e) {
    // From a std container or Eigen's temporaries rather than the tensor allocator: the same report.
    const CpuMemoryStats m = cpu_allocator::stats();
    // Tensors freed while the exception unwound, so the peak is what tells how much the run used.
    err << command << ": error: [memory] out of memory: an allocation outside the tensor allocator failed ("
        << e.what() << "); tensors held at most " << m.peak_allocated_bytes
        << " bytes; reduce the batch size, the sequence length or the model size" << oom_hint << "\n";
    return 4;
  } catch (const std::exception& e) {
    err << command << ": error: " << e.what() << "\n";
    return 1;
  } catch (...) {
    err << command << ": error: an exception that is not a std::exception\n";
    return 1;
  }
}

}  // namespace relgrad