// relgrad render FILE.mid [-o OUT.wav] [--soundfont FILE.sf2]: a .mid file → .wav through FluidSynth
// (an optional Debian package, never linked: run as a program).
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "core/file_io.h"
#include "train/command/cli_commands.h"
#include "train/command/output_guard.h"
#include "train/command/subcommand.h"
#include "train/music/midi.h"

namespace relgrad::cli_detail {
namespace {

bool executable_in_path(const std::string& name, std::string* found) {
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t colon = dirs.find(':', start);
    std::string dir = dirs.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) {
      *found = candidate;
      return true;
    }
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  return false;
}

// A SoundFont 2 file is a RIFF file of form type "sfbk" ("RIFF", a 4-byte size, "sfbk"). FluidSynth
// only warns about any other file and renders with no instruments or its default font (a .mid given as
// the font rendered the song twice), so what is not one is refused before it runs.
void check_soundfont(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return;  // a missing font is reported below, with how to install one
  char head[12] = {};
  in.read(head, sizeof head);
  if (in.gcount() == sizeof head && std::memcmp(head, "RIFF", 4) == 0 && std::memcmp(head + 8, "sfbk", 4) == 0)
    return;
  throw UsageError("[render] --soundfont " + path +
                   " is not a SoundFont (a .sf2 file starts with \"RIFF\", its size and \"sfbk\")");
}

int render(const std::string& midi_path, std::string wav_path, const std::string& soundfont, std::ostream& out) {
  if (wav_path.empty()) {
    size_t dot = midi_path.find_last_of('.');
    wav_path = (dot == std::string::npos ? midi_path : midi_path.substr(0, dot)) + ".wav";
  }
  refuse_output_over_input("render", {{"the MIDI file", midi_path}, {"--soundfont", soundfont}}, {{"-o", wav_path}});
  read_midi(midi_path);  // a clear error for a bad file, before anything else
  check_soundfont(soundfont);
  std::string fluidsynth;
  if (!executable_in_path("fluidsynth", &fluidsynth))
    throw Error("[render] fluidsynth is not installed; install it and the FluidR3 soundfont with: "
                "apt-get update && apt-get install -y fluidsynth fluid-soundfont-gm");
  struct stat st {};
  if (::stat(soundfont.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
    throw Error("[render] soundfont " + soundfont + " not found; install the FluidR3 soundfont with: "
                "apt-get update && apt-get install -y fluid-soundfont-gm (or pass --soundfont FILE.sf2)");
  // The one atomic writer (core/file_io.h) owns the output: it refuses a target that is a FIFO, a
  // device, a directory or a symbolic link before FluidSynth runs, FluidSynth renders into its
  // temporary file, and only a successful render is fsynced and renamed over the target.
  AtomicFile wav(wav_path, "render");
  std::vector<std::string> args = {fluidsynth, "-ni", "-q", "-F", wav.temp_path(), "-T", "wav", "-r", "44100",
                                   soundfont, midi_path};
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, fluidsynth.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw Error("[render] cannot run " + fluidsynth + ": " + std::strerror(rc));
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
                  ::stat(wav.temp_path().c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 44;
  if (!ok)  // the AtomicFile removes its temporary file; the target stays as it was
    throw Error("[render] fluidsynth failed on " + midi_path + " (exit status " +
                std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) + ")");
  wav.commit();
  out << "wrote " << wav_path << "\n";
  return 0;
}

class RenderCommand final : public Subcommand {
 public:
  void declare(CommandLine& app) override {
    app.add_option("midi", midi_, "the .mid file").required();
    app.add_option("-o,--output", wav_, "the .wav file (default: next to the .mid)");
    app.add_option("--soundfont", soundfont_, "SoundFont file");
  }
  int run(CommandLine&, std::ostream& out) override { return render(midi_, wav_, soundfont_, out); }

 private:
  std::string midi_, wav_, soundfont_ = "/usr/share/sounds/sf2/FluidR3_GM.sf2";
};

}  // namespace

std::unique_ptr<Subcommand> make_render_command() { return std::make_unique<RenderCommand>(); }

}  // namespace relgrad::cli_detail
