// build/relgrad: the command-line tool. Everything is in train/cli.cpp, so tests can run it in-process.
#include <iostream>

#include "train/cli.h"

int main(int argc, char** argv) { return relgrad::run_cli(argc, argv, std::cout, std::cerr); }
