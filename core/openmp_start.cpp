// How the OpenMP threads of every program linking relgrad wait: passively, unless the caller chose.
//
// Why: libgomp's default barrier spins (300,000 turns) before it sleeps. With two threads on two
// cores and one core busy with another process, each of a step's hundreds of parallel regions ends
// only when the thread sharing the busy core gets a time slice, while its partner spins on the other
// core: example 04 took 15-26 s beside one busy process, against 0.7 s idle (docs/learn.md has the
// figures with this start-up). Waiting passively (sleeping on a futex at once) changes no result,
// only how a waiting thread waits (docs/design.md, "Threads").
//
// How: the OpenMP runtime reads OMP_WAIT_POLICY once, in its own constructor, before main() and
// before any static initializer of the program; and the C library's constructor, which runs before
// it, resets the environment to the one the process started with, so a setenv() made earlier is
// lost. The one place left is before the process really starts: an entry of the executable's
// .preinit_array (the loader calls it first) that, when none of OMP_WAIT_POLICY, GOMP_SPINCOUNT
// (libgomp) or KMP_BLOCKTIME (LLVM's libomp) is set, runs the same executable again, same arguments,
// with OMP_WAIT_POLICY=passive added (about 3 ms). A caller's setting is kept as it is:
// `OMP_WAIT_POLICY=active` gets the spinning back where it pays (a dedicated machine). A short spin
// before the sleep (GOMP_SPINCOUNT=1000 added here instead) was measured on a 2-core machine: the main
// job 0.70-0.83x as long when it was nearly idle, but example 04 beside a busy process up to 2.5x as
// long as alone, and 1.4-3.2x the passive time under load; 200 turns gained nothing under load
// (docs/benchmarks.md, "The wait policy and the main job"). So the start-up asks for no spin. Where the
// executable cannot be run again (/proc not mounted), the program goes on with the runtime's default.
// The variable is inherited by the processes a program starts. Under a debugger the second run shows
// as "process N is executing new program"; set OMP_WAIT_POLICY to start without it.
//
// Every executable linking relgrad_core gets the entry: relgrad_core's link interface names the
// symbol relgrad_openmp_start as undefined (core/CMakeLists.txt, and relgrad.pc for pkg-config), so
// the linker takes this object out of the static library although no code calls it.
// tests/openmp_wait.sh checks what libgomp reports with the variable unset, set and overridden.
#include <unistd.h>

#include <cstring>
#include <initializer_list>

namespace {

bool caller_chose(char** envp) {
  for (char** e = envp; *e != nullptr; ++e)
    for (const char* name : {"OMP_WAIT_POLICY=", "GOMP_SPINCOUNT=", "KMP_BLOCKTIME="})
      if (std::strncmp(*e, name, std::strlen(name)) == 0) return true;
  return false;
}

// Runs before the C library is initialised: no allocation, only the stack and a system call.
void wait_passively_unless_chosen(int, char** argv, char** envp) {
  if (envp == nullptr || caller_chose(envp)) return;
  static char passive[] = "OMP_WAIT_POLICY=passive";
  size_t n = 0;
  while (envp[n] != nullptr) ++n;
  if (n > 4096) return;  // an environment this large is left alone rather than copied onto the stack
  char* env[4098];
  for (size_t i = 0; i < n; ++i) env[i] = envp[i];
  env[n] = passive;
  env[n + 1] = nullptr;
  ::execve("/proc/self/exe", argv, env);  // returns only on failure: go on as started
}

}  // namespace

// extern "C" and not const (a const would have internal linkage): the name core/CMakeLists.txt asks
// the linker for.
extern "C" {
__attribute__((section(".preinit_array"), used)) void (*relgrad_openmp_start)(int, char**, char**) =
    &wait_passively_unless_chosen;
}
