# Runs one numbered example and checks its output against the "// expect:" lines of its source
# (examples/CMakeLists.txt says how the checks are stated). They are read here, when the test runs,
# so an edited example is checked against its edited lines without re-running CMake.
# Called as: cmake -DPROGRAM=<exe> -DSOURCE=<the example's .cpp> -P check_example.cmake
file(STRINGS ${SOURCE} expects REGEX "^// expect: ")
file(STRINGS ${SOURCE} args_line REGEX "^// ctest-args: ")
if(NOT expects)
  message(FATAL_ERROR "${SOURCE} states no '// expect:' line: the test would assert nothing")
endif()
list(TRANSFORM expects REPLACE "^// expect: " "")
string(REPLACE "// ctest-args: " "" args "${args_line}")
separate_arguments(arg_list UNIX_COMMAND "${args}")
execute_process(COMMAND ${PROGRAM} ${arg_list} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${PROGRAM} exited with ${rc}")
endif()
foreach(expect IN LISTS expects)
  if(NOT out MATCHES "${expect}")
    message(FATAL_ERROR "${PROGRAM}: no line of its output matches the expected '${expect}'")
  endif()
endforeach()
list(LENGTH expects n)
message("${PROGRAM}: all ${n} expected lines found")
