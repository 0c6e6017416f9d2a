# cmake -DBUILD_DIR=<sanitizer build> -P run_sanitized_tests.cmake
# Runs the tests of the sanitizer build that exercise the code: the unit tests and the
# end-to-end tests, without the Python plot tests and the install test (no C++ of ours runs
# there), the statistical accuracy, interval calibration, demo and random-kill runs (long, and
# exercising no code the other tests do not), the strace test (LeakSanitizer cannot run under
# ptrace), the Slurm test (a second cluster; e2e_shards runs ap_analyze --shard and ap_merge here),
# the BLAS kernel policy test (it preloads a library and times CPU use; the policy's code runs in
# every other test here), the plasticity study (Python front end and plots only), the A/A
# calibration on real captures (e2e_aa_real: hundreds of analyses and comparisons of two
# fixtures, past its 600 s under the sanitizers since it covers the encoder too; ap_analyze and
# ap_compare run here in e2e_compare_*, e2e_documents and e2e_real_*) and the
# front-end comparisons again on a simulated OpenBLAS fallback (the same code, a preload).
# Sanitizer reports go to files under BUILD_DIR/sanitizer-reports: the test fails when any
# appears, even if the program's exit status was what a test expected.
set(reports ${BUILD_DIR}/sanitizer-reports)
file(REMOVE_RECURSE ${reports})
file(MAKE_DIRECTORY ${reports})
# Writable by every user: a hostile-matrix case runs ap_analyze as nobody (a process limit binds
# only a user other than root), and a sanitizer that cannot open its report file dies.
execute_process(COMMAND chmod 1777 ${reports})
set(ENV{ASAN_OPTIONS} "detect_leaks=1:halt_on_error=1:exitcode=86:log_path=${reports}/asan")
set(ENV{UBSAN_OPTIONS} "halt_on_error=1:print_stacktrace=1:exitcode=87:log_path=${reports}/ubsan")
set(ENV{LSAN_OPTIONS} "exitcode=88")
# Findings in code outside the front end, reported to its owners: each test named here is
# left out (and listed in the output) until the fix lands, then removed from this list.
# (none at present)
set(known_findings "")
foreach(finding ${known_findings})
  message(WARNING "NOT RUN under the sanitizers (a known finding in the library, see run_sanitized_tests.cmake): ${finding}")
endforeach()
string(REPLACE ";" "|" known "${known_findings}")
set(excluded "^(python_|install_consumer$|e2e_synthetic_accuracy$|e2e_interval_calibration$|e2e_demo$|e2e_kill_random$|e2e_kill_every_step$|e2e_slurm$|e2e_aa_real$|e2e_blas_core$|e2e_plasticity_study$|.*_blas_fallback$)")
if(known)
  set(excluded "${excluded}|^(${known})$")
endif()
# Two at a time (the machines have 2 cores; most of these tests run one process on one core):
# the tests that must not run side by side say so by their RESOURCE_LOCK and RUN_SERIAL.
execute_process(
  COMMAND ${CMAKE_CTEST_COMMAND} --test-dir ${BUILD_DIR} --output-on-failure --parallel 2 -E "${excluded}"
  RESULT_VARIABLE status)
file(GLOB found ${reports}/*)
foreach(report ${found})
  file(READ ${report} text)
  message("${report}:\n${text}")
endforeach()
list(LENGTH found count)
if(count GREATER 0)
  message(FATAL_ERROR "sanitizer tests: ${count} sanitizer report(s), shown above")
endif()
if(NOT status EQUAL 0)
  message(FATAL_ERROR "sanitizer tests: some test failed (see above)")
endif()
