# cmake -DSOURCE_DIR=.. -DBUILD_DIR=.. -DCXX=clang++ -DFUZZ=ON|OFF -DGENERATOR=.. -DPYTHON=.. -P sanitizer_build.cmake
# Configures and builds the project with ASan + UBSan (every report fatal) into BUILD_DIR:
# the unit tests (library, front end), the programs and (FUZZ) the libFuzzer targets: every
# test executable ctest lists there. -O1 with assertions on: the level the sanitizers' and
# libFuzzer's documentation recommend, and much less compile time than -O2 for the same
# checks. Not the -ffast-math and no-int128 variants of two unit test files
# (AP_TEST_VARIANTS=OFF): they check build settings of the normal build, where they run, and
# run no library code the sanitized ap_tests does not run.
set(flags "-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -gline-tables-only")
set(targets ap_tests ap_run_tests ap_analyze ap_merge ap_synth ap_compare compose_head readme_example)
if(FUZZ)
  list(APPEND targets fuzz_npy fuzz_config fuzz_cmdline)
endif()
execute_process(
  COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${BUILD_DIR} -G ${GENERATOR}
          -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE=-O1
          -DCMAKE_CXX_COMPILER=${CXX} "-DCMAKE_CXX_FLAGS=${flags}"
          "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=address,undefined"
          -DAP_BUILD_TESTS=ON -DAP_BUILD_EXAMPLES=ON -DAP_BUILD_BENCHMARKS=OFF -DAP_BUILD_FUZZERS=${FUZZ}
          -DAP_SANITIZER_TESTS=OFF -DAP_TEST_VARIANTS=OFF -DAP_TEST_PYTHON=${PYTHON}
  RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "sanitizer build: configuring ${BUILD_DIR} with ${CXX} failed")
endif()
if(NOT FUZZ)
  message(STATUS "sanitizer build: ${CXX} is not clang, so the libFuzzer targets are not built")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${BUILD_DIR} -j2 --target ${targets} RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "sanitizer build: building ${targets} failed")
endif()
