# cmake -DFUZZER=<binary> -DSEEDS=<seed corpus> -DDICT=<dictionary or none>
#       -DWORK=<corpus folder> -DSECONDS=<n> -P run_fuzzer.cmake
# Runs one libFuzzer target for SECONDS on its seed corpus (new inputs go to WORK); fails on
# a crash, a sanitizer report, a leak, a timeout (10 s per input) or more than 2 GiB.
if(NOT EXISTS ${FUZZER})
  message(FATAL_ERROR "${FUZZER} was not built (see the sanitizer_build test)")
endif()
file(MAKE_DIRECTORY ${WORK}/corpus ${WORK}/artifacts)
set(args -max_total_time=${SECONDS} -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=2048 -print_final_stats=1
         -artifact_prefix=${WORK}/artifacts/)
if(EXISTS ${DICT})
  list(APPEND args -dict=${DICT})
endif()
set(ENV{ASAN_OPTIONS} "detect_leaks=1")
execute_process(COMMAND ${FUZZER} ${args} ${WORK}/corpus ${SEEDS} RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "${FUZZER}: a finding (exit ${status}); the input is in ${WORK}/artifacts")
endif()
