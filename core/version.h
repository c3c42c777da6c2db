// The library's version, as the top-level CMakeLists.txt's project(VERSION) says: the one place it
// is defined. `relgrad --version`, checkpoints ("writer" metadata), relgradConfigVersion.cmake,
// relgrad.pc and the Debian package all read it from there.
#pragma once

namespace relgrad {

// "MAJOR.MINOR.PATCH" of the library this program is linked against (e.g. "0.1.0").
const char* version();

}  // namespace relgrad
