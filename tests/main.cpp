// The test runner: doctest's main. Every TEST_CASE is also a ctest test (doctest_discover_tests).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
