#include "core/version.h"

// core/CMakeLists.txt defines RELGRAD_VERSION for this file alone, so a version bump recompiles one file.
#ifndef RELGRAD_VERSION
#error "RELGRAD_VERSION must be defined by the build (core/CMakeLists.txt)"
#endif

namespace relgrad {

const char* version() { return RELGRAD_VERSION; }

}  // namespace relgrad
