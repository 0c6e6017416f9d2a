# The tests of the Python package (tests/python/test_bindings_*.py, test_inmemory_profile.py,
# test_capture_*.py, test_train_decoder.py, test_results_api.py),
# with pytest, in the project's venv (tests/ap_python.cmake: AP_TEST_PYTHON_FULL).
#
# python_package_install (a fixture every one of them requires) installs the package built from
# the current sources into that venv, as the README says (pip install .): scikit-build-core runs
# this project's CMake with AP_BUILD_PYTHON=ON in ${PROJECT_BINARY_DIR}/python-package, kept
# between runs, so that an unchanged source tree rebuilds nothing (scripts/setup_python.sh uses
# the same folder for the build tree `build`). Without build isolation: nanobind and
# scikit-build-core are the venv's (requirements.txt pins them as pyproject.toml does).
if(CMAKE_CXX_FLAGS MATCHES "-fsanitize")
  # The sanitizer build (tests/sanitizers): pip would build the module with the package's own
  # flags, not this tree's; the package is tested by the normal build.
  return()
endif()
add_test(NAME python_package_install
         COMMAND ${AP_TEST_PYTHON} -m pip install --no-build-isolation --no-deps --quiet
                 --config-settings=build-dir=${PROJECT_BINARY_DIR}/python-package ${PROJECT_SOURCE_DIR})
set_tests_properties(python_package_install PROPERTIES TIMEOUT 1800 LABELS python
                     FIXTURES_SETUP ap_python_package)

set(_ap_binding_tests bindings_kernel bindings_steps bindings_extensions bindings_companion bindings_memory bindings_api
    inmemory_profile capture_families capture_sniffer capture_toolkits afternoon)
# scripts/train_decoder.py at a tiny scale (the decoder of tests/data/real_decoder).
list(APPEND _ap_binding_tests train_decoder)
set(_ap_binding_env "")
if(AP_BUILD_EXAMPLES)
  # The comparisons with the C++ programs (same rows, same CSV bytes, same shards).
  list(APPEND _ap_binding_tests bindings_head bindings_dump bindings_shards results_api)
  set(_ap_binding_env AP_ANALYZE=$<TARGET_FILE:ap_analyze> AP_SYNTH=$<TARGET_FILE:ap_synth>
                      AP_MERGE=$<TARGET_FILE:ap_merge>)
endif()
# The comparisons with the C++ programs run again as on a CPU where OpenBLAS falls back
# (ap_add_frontend_test, tests/CMakeLists.txt).
set(_ap_frontend_tests bindings_head bindings_dump bindings_shards bindings_extensions results_api)
foreach(name IN LISTS _ap_binding_tests)
  set(command ${CMAKE_COMMAND} -E env ${_ap_binding_env}
              ${AP_TEST_PYTHON} -m pytest -q -p no:cacheprovider ${CMAKE_CURRENT_SOURCE_DIR}/python/test_${name}.py)
  set(names python_${name})
  if(AP_BUILD_EXAMPLES AND name IN_LIST _ap_frontend_tests)
    ap_add_frontend_test(NAME python_${name} COMMAND ${command})
    list(APPEND names python_${name}_blas_fallback)
  else()
    add_test(NAME python_${name} COMMAND ${command})
  endif()
  set_tests_properties(${names} PROPERTIES TIMEOUT 900 LABELS python FIXTURES_REQUIRED ap_python_package)
endforeach()
# The scripts that import the installed package when there is one (capture_qk.py takes
# attention_plasticity.capture from it) run after it is current.
set_tests_properties(python_capture_qk python_convert_sniffed_qk PROPERTIES FIXTURES_REQUIRED ap_python_package)
