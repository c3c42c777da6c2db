# relgrad as a library other projects build on (README "Use relgrad in your own project"):
#
#   cmake --install build --prefix P    P/bin/relgrad                        the command
#                                       P/include/relgrad/relgrad.h, core/.. the public headers, by
#                                                                            their path from the root
#                                       P/lib/librelgrad_<floor>.a           the engine's floors (static);
#                                                                            the lab (plot, instruments,
#                                                                            the command's code) is not
#                                                                            installed: it is in bin/relgrad
#                                       P/lib/cmake/relgrad/relgradConfig*   find_package(relgrad):
#                                                                            relgrad::relgrad, relgrad::<floor>
#                                       P/lib/pkgconfig/relgrad.pc           pkg-config --cflags --libs relgrad
#                                       P/share/doc/relgrad/                 README.md, cli.md
#   cpack -G DEB (in the build tree)    relgrad_<version>_<arch>.deb of the same files under /usr
#
# The version is project(VERSION) in the top-level CMakeLists.txt; everything here reads it.
# tests/install_downstream.sh proves it: install into a scratch prefix, build examples/downstream/
# with find_package and with pkg-config, run it; tests/package_deb.sh does the same from the .deb.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# The floors, bottom to top, then the wholes (CMakeLists.txt, train/CMakeLists.txt).
set(RELGRAD_INSTALLED_LIBRARIES
    relgrad_base relgrad_cuda relgrad_core relgrad_cpu relgrad_backend relgrad_autograd relgrad_layers
    relgrad_optim relgrad_data relgrad_music relgrad_trainer relgrad_config relgrad_train relgrad)
# Exported as relgrad::core, relgrad::layers, ... and relgrad::relgrad (the whole library).
foreach(lib ${RELGRAD_INSTALLED_LIBRARIES})
  if(NOT lib STREQUAL "relgrad")
    string(REGEX REPLACE "^relgrad_" "" short ${lib})
    set_target_properties(${lib} PROPERTIES EXPORT_NAME ${short})
  endif()
endforeach()
# Installed, "core/tensor.h" resolves under include/relgrad and <relgrad/relgrad.h> under include.
target_include_directories(relgrad_base INTERFACE
                           $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/relgrad>
                           $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
install(TARGETS ${RELGRAD_INSTALLED_LIBRARIES} EXPORT relgradTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
# The command finds libcudart (CUDA builds) where it was linked from, also once installed.
set_target_properties(relgrad_cli PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
install(TARGETS relgrad_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# The public headers: every .h of the engine's folders and the .def tables they include (the .cuh of
# cuda/ are its kernels' own), not the lab's (train/plot, train/instruments, train/command).
# tests/install_downstream.sh compiles each of them from the install alone.
install(FILES ${CMAKE_SOURCE_DIR}/relgrad.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/relgrad)
foreach(dir core cuda autograd layers train)
  install(DIRECTORY ${CMAKE_SOURCE_DIR}/${dir} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/relgrad
          FILES_MATCHING PATTERN "*.h" PATTERN "*.def"
          REGEX "/train/(plot|instruments|command)$" EXCLUDE)
endforeach()
install(FILES ${CMAKE_SOURCE_DIR}/README.md ${CMAKE_SOURCE_DIR}/docs/cli.md DESTINATION ${CMAKE_INSTALL_DOCDIR})

# ---- find_package(relgrad) ------------------------------------------------------------------------
set(RELGRAD_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/relgrad)
install(EXPORT relgradTargets NAMESPACE relgrad:: DESTINATION ${RELGRAD_CMAKE_DIR})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/relgradConfig.cmake.in
                              ${CMAKE_BINARY_DIR}/relgradConfig.cmake INSTALL_DESTINATION ${RELGRAD_CMAKE_DIR})
# 0.x: a minor version may break the API, so only the same MAJOR.MINOR satisfies a request.
write_basic_package_version_file(${CMAKE_BINARY_DIR}/relgradConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/relgradConfig.cmake ${CMAKE_BINARY_DIR}/relgradConfigVersion.cmake
        DESTINATION ${RELGRAD_CMAKE_DIR})

# ---- relgrad.pc -----------------------------------------------------------------------------------
# The static floors top to bottom, so that each library's undefined symbols come before their
# definitions on a plain linker's command line; then what the floors link privately.
set(RELGRAD_PC_LIBS " -Wl,--undefined=relgrad_openmp_start")  # core/openmp_start.cpp: the wait policy
foreach(lib config music trainer optim data layers autograd backend cpu core cuda)
  string(APPEND RELGRAD_PC_LIBS " -lrelgrad_${lib}")
endforeach()
set(RELGRAD_PC_CFLAGS "")
string(APPEND RELGRAD_PC_LIBS " ${OpenMP_CXX_FLAGS}")
if(RELGRAD_WITH_NCCL)
  string(APPEND RELGRAD_PC_LIBS " ${RELGRAD_NCCL_LIBRARY}")
endif()
if(RELGRAD_WITH_MPI)
  foreach(lib ${MPI_CXX_LIBRARIES})
    string(APPEND RELGRAD_PC_LIBS " ${lib}")
  endforeach()
endif()
if(RELGRAD_WITH_CUDA)
  string(APPEND RELGRAD_PC_CFLAGS " -DRELGRAD_WITH_CUDA=1")
  string(APPEND RELGRAD_PC_LIBS " -L${CUDAToolkit_LIBRARY_DIR} -Wl,-rpath,${CUDAToolkit_LIBRARY_DIR} -lcudart")
endif()
if(CMAKE_DL_LIBS)
  string(APPEND RELGRAD_PC_LIBS " -l${CMAKE_DL_LIBS}")
endif()
string(APPEND RELGRAD_PC_LIBS " -pthread")
# From lib/pkgconfig (or lib/<multiarch>/pkgconfig) up to the prefix: "../..".
file(RELATIVE_PATH RELGRAD_PC_UP "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
configure_file(${CMAKE_CURRENT_LIST_DIR}/relgrad.pc.in ${CMAKE_BINARY_DIR}/relgrad.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/relgrad.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# ---- the Debian package: cpack -G DEB in the build tree -------------------------------------------
# cpack installs what is built and never builds: its "preinstall" step would otherwise build every
# target first (the tests too), and tests/package_deb.sh must not rebuild. `make install` likewise.
set(CMAKE_SKIP_INSTALL_ALL_DEPENDENCY ON)
# Depends: what a program built against the package needs (the -dev packages find_package(relgrad)
# looks for; the command's shared libraries). A CUDA build also needs NVIDIA's CUDA toolkit of the
# version it was built with, which is no Debian package and so is not declared.
set(RELGRAD_DEB_DEPENDS "libc6, libstdc++6, libgcc-s1, libpng16-16, libeigen3-dev (>= 3.4), \
nlohmann-json3-dev (>= 3.10), libtomlplusplus-dev")
if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  string(APPEND RELGRAD_DEB_DEPENDS ", libomp-dev")  # clang's OpenMP runtime
else()
  string(APPEND RELGRAD_DEB_DEPENDS ", libgomp1")
endif()
if(RELGRAD_WITH_MPI)
  string(APPEND RELGRAD_DEB_DEPENDS ", libopenmpi-dev")
endif()
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME relgrad)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR relgrad)
set(CPACK_PACKAGE_CONTACT "relgrad maintainers <relgrad@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "small C++ training framework: tape autograd, relative attention, the relgrad command")
set(CPACK_PACKAGE_DESCRIPTION "Tape-based autograd over n-d tensors on CPU (Eigen + OpenMP) and CUDA, \
a zoo of relative-position attention schemes, end-to-end training and the relgrad command. \
Static libraries, headers (/usr/include/relgrad), find_package(relgrad) and relgrad.pc.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # relgrad_<version>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "${RELGRAD_DEB_DEPENDS}")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "cmake, pkg-config, g++")
set(CPACK_PACKAGE_FILE_NAME "relgrad_${PROJECT_VERSION}")  # other generators; DEB uses DEB-DEFAULT
include(CPack)
