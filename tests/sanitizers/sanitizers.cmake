# The sanitizer build and the fuzzers, registered as tests of the normal build so that the
# README's test command runs them (included from examples/CMakeLists.txt):
#   sanitizer_build   configures and builds this project with AddressSanitizer and
#                     UndefinedBehaviorSanitizer into <build>/sanitize (clang when found,
#                     else g++; with clang the libFuzzer targets of fuzz/ too)
#   sanitizer_tests   runs there the unit tests and the end-to-end tests (not the Python
#                     plot tests, the install test, nor the long statistical and strace ones);
#                     fails on any sanitizer report (reports are written to files, so that
#                     even a report in a program whose failure a test expects is caught)
#   fuzz_npy, fuzz_config, fuzz_cmdline
#                     each libFuzzer target for AP_FUZZ_SECONDS on its seed corpus; fails on
#                     a crash, a sanitizer report, a leak, a timeout or an out-of-memory
option(AP_SANITIZER_TESTS "Register the sanitizer build and the fuzzers as tests" ON)
set(AP_FUZZ_SECONDS 60 CACHE STRING "How long ctest runs each fuzz target (seconds)")
if(NOT AP_SANITIZER_TESTS)
  return()
endif()

find_program(AP_SANITIZER_CXX NAMES clang++ clang++-14 clang++-15 clang++-16 clang++-13)
set(AP_SANITIZER_FUZZ ON)
if(NOT AP_SANITIZER_CXX)
  set(AP_SANITIZER_CXX ${CMAKE_CXX_COMPILER})
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    set(AP_SANITIZER_FUZZ OFF)
  endif()
endif()
set(AP_SANITIZER_DIR ${PROJECT_BINARY_DIR}/sanitize)
set(AP_SANITIZER_SCRIPTS ${PROJECT_SOURCE_DIR}/tests/sanitizers)

add_test(NAME sanitizer_build
         COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${PROJECT_SOURCE_DIR} -DBUILD_DIR=${AP_SANITIZER_DIR}
                 -DCXX=${AP_SANITIZER_CXX} -DFUZZ=${AP_SANITIZER_FUZZ} -DGENERATOR=${CMAKE_GENERATOR}
                 -DPYTHON=${AP_TEST_PYTHON}
                 -P ${AP_SANITIZER_SCRIPTS}/sanitizer_build.cmake)
# COST: under ctest -j, the longest chain (this build, then sanitizer_tests) starts first.
set_tests_properties(sanitizer_build PROPERTIES FIXTURES_SETUP sanitizer TIMEOUT 1800 LABELS sanitizer COST 10000)

add_test(NAME sanitizer_tests
         COMMAND ${CMAKE_COMMAND} -DBUILD_DIR=${AP_SANITIZER_DIR}
                 -P ${AP_SANITIZER_SCRIPTS}/run_sanitized_tests.cmake)
# Under ctest -j: the end-to-end tests there run the installed Python package's front ends
# (with the full environment), so after python_package_install has made it current; and the
# hostile-matrix case that runs as nobody under a process limit of 1 (counted over every process
# of that user) never beside the normal build's (examples/CMakeLists.txt, the same lock).
set(_ap_sanitizer_fixtures sanitizer)
if(AP_TEST_PYTHON_FULL)
  list(APPEND _ap_sanitizer_fixtures ap_python_package)
endif()
set_tests_properties(sanitizer_tests PROPERTIES FIXTURES_REQUIRED "${_ap_sanitizer_fixtures}" TIMEOUT 1200
                                                LABELS sanitizer RESOURCE_LOCK ap_user_nobody COST 5000)

foreach(target fuzz_npy fuzz_config fuzz_cmdline)
  if(AP_SANITIZER_FUZZ)
    add_test(NAME ${target}
             COMMAND ${CMAKE_COMMAND} -DFUZZER=${AP_SANITIZER_DIR}/fuzz/${target}
                     -DSEEDS=${PROJECT_SOURCE_DIR}/fuzz/corpus/${target}
                     -DDICT=${PROJECT_SOURCE_DIR}/fuzz/${target}.dict
                     -DWORK=${AP_SANITIZER_DIR}/fuzz-work/${target} -DSECONDS=${AP_FUZZ_SECONDS}
                     -P ${AP_SANITIZER_SCRIPTS}/run_fuzzer.cmake)
  else()
    add_test(NAME ${target} COMMAND sh -c "echo 'SKIP: no clang++ found, so no libFuzzer targets (install clang and libclang-rt-dev)'; exit 77")
  endif()
  set_tests_properties(${target} PROPERTIES FIXTURES_REQUIRED sanitizer TIMEOUT 900 LABELS "sanitizer;fuzz"
                                            SKIP_RETURN_CODE 77)
endforeach()
