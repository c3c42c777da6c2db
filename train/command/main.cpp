// build/relgrad: the command-line tool. Everything is in train/command/cli.cpp, so tests can run it in-process.
// Under mpirun, init_world() starts MPI and finish_world() ends it, or, when this rank failed, ends
// the whole job (the other ranks may be waiting for it in a collective); train/trainer/distributed.h.
#include <cstdio>
#include <iostream>
#include <new>

#include "train/command/cli.h"
#include "train/trainer/distributed.h"

int main(int argc, char** argv) {
  try {
    relgrad::init_world();
  } catch (const std::exception& e) {
    std::cerr << "relgrad: error: " << e.what() << "\n";
    return 1;
  }
  int code = 4;
  try {  // run_cli reports every error itself; only its own setup could still run out of memory
    code = relgrad::run_cli(argc, argv, std::cout, std::cerr);
  } catch (const std::bad_alloc&) {
    std::fputs("relgrad: error: [memory] out of memory while starting\n", stderr);  // fputs: no allocation
  }
  return relgrad::finish_world(code);
}
