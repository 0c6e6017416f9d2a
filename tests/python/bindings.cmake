# The tests of the Python package (tests/python/test_bindings_*.py, test_inmemory_profile.py,
# test_capture_*.py, test_train_decoder.py, test_monitor.py, test_results_api.py, test_report.py),
# with pytest, in the project's venv (tests/ap_python.cmake: AP_TEST_PYTHON_FULL).
#
# python_package_install (a fixture every one of them requires) installs the package built from
# the current sources into that venv as a user gets it: the self-contained cluster wheel of
# scripts/build_wheel.sh (README.md, "Python"; manylinux_2_28), built into
# ${PROJECT_BINARY_DIR}/wheel, so that every Python test, the byte comparisons with the C++
# programs and their OpenBLAS-fallback runs included, runs the wheel's module with the wheel's
# OpenBLAS (Debian's source built for glibc 2.28). scikit-build-core runs this project's CMake with
# AP_BUILD_PYTHON=ON in ${PROJECT_BINARY_DIR}/python-package-cluster, kept between runs, so that
# an unchanged source tree compiles nothing again. Without build isolation: nanobind and
# scikit-build-core are the venv's (requirements.txt pins them as pyproject.toml does).
#
# The wheel's OpenBLAS and yaml-cpp (scripts/build_cluster_deps.sh, about 20 CPU-minutes the
# first time, kept in ${PROJECT_BINARY_DIR}/cluster-deps) are a target of the build itself,
# ap_cluster_deps (make -j1 inside, one of the build's jobs): on a fresh clone (CI) they are built
# beside the C++ programs and tests, not after them on the path of the Python tests.
if(CMAKE_CXX_FLAGS MATCHES "-fsanitize")
  # The sanitizer build (tests/sanitizers): pip would build the module with the package's own
  # flags, not this tree's; the package is tested by the normal build.
  return()
endif()
add_custom_target(ap_cluster_deps ALL
                  COMMAND ${CMAKE_COMMAND} -E env AP_WHEEL_PYTHON=${AP_TEST_PYTHON} AP_DEPS_JOBS=1
                          ${PROJECT_SOURCE_DIR}/scripts/build_cluster_deps.sh ${PROJECT_BINARY_DIR}/cluster-deps
                  COMMENT "The cluster wheel's OpenBLAS and yaml-cpp (scripts/build_cluster_deps.sh; built once)"
                  VERBATIM)
add_test(NAME python_package_install
         COMMAND ${CMAKE_COMMAND} -E env AP_WHEEL_PYTHON=${AP_TEST_PYTHON} AP_WHEEL_QUICK=1
                 AP_WHEEL_BUILD_DIR=${PROJECT_BINARY_DIR}/python-package-cluster
                 AP_CLUSTER_DEPS=${PROJECT_BINARY_DIR}/cluster-deps
                 bash -c "set -euo pipefail; wheel=$(\"$0\" \"$1\" | tail -n 1); \"$2\" -m pip install --quiet --no-deps --force-reinstall \"$wheel\""
                 ${PROJECT_SOURCE_DIR}/scripts/build_wheel.sh ${PROJECT_BINARY_DIR}/wheel ${AP_TEST_PYTHON})
set_tests_properties(python_package_install PROPERTIES TIMEOUT 3600 LABELS python
                     FIXTURES_SETUP ap_python_package)

set(_ap_binding_tests bindings_kernel bindings_steps bindings_extensions bindings_companion bindings_memory bindings_api
    inmemory_profile capture_families capture_sniffer capture_toolkits afternoon package_layers
    capture_dispatch documents capture_computed capture_sweep)
# scripts/train_decoder.py at a tiny scale (the decoder of tests/data/real_decoder).
list(APPEND _ap_binding_tests train_decoder monitor)
# Issue 32: A/A on all-MiniLM-L6-v2 with documents cut into several examples (about 3 minutes).
list(APPEND _ap_binding_tests aa_documents)
set(_ap_binding_env "")
if(AP_BUILD_EXAMPLES)
  # The comparisons with the C++ programs (same rows, same CSV bytes, same shards).
  # compare_objects: compare_runs on result objects, in memory, against ap_compare on their folders.
  # report: ap.report's pages opened in headless chromium (test_report.py; about 25 s).
  list(APPEND _ap_binding_tests bindings_head bindings_dump bindings_shards bindings_documents results_api
       compare_objects report output_folders)
  set(_ap_binding_env AP_ANALYZE=$<TARGET_FILE:ap_analyze> AP_SYNTH=$<TARGET_FILE:ap_synth>
                      AP_MERGE=$<TARGET_FILE:ap_merge> AP_COMPARE=$<TARGET_FILE:ap_compare>)
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
# One version everywhere (test_version.py): __version__, the metadata, --version, run.json, the
# CMake package, CHANGELOG.md.
if(AP_BUILD_EXAMPLES)
  add_test(NAME python_version
           COMMAND ${CMAKE_COMMAND} -E env ${_ap_binding_env} AP_COMPARE=$<TARGET_FILE:ap_compare>
                   AP_BUILD_DIR=${PROJECT_BINARY_DIR} AP_CMAKE=${CMAKE_COMMAND}
                   ${AP_TEST_PYTHON} -m pytest -q -p no:cacheprovider ${CMAKE_CURRENT_SOURCE_DIR}/python/test_version.py)
  set_tests_properties(python_version PROPERTIES TIMEOUT 600 LABELS python FIXTURES_REQUIRED ap_python_package)
  # The wheel as a user gets it (test_wheel_install.py): a fresh venv, pip install of the wheel
  # with no index and no compiler, its libraries resolved inside it, and the byte comparisons of
  # test_bindings_dump.py with ap_analyze run from it (about 60 s on 2 busy cores: the install
  # 10 s, auditwheel show 5 s, the comparisons the rest). COST: started early among the Python tests.
  add_test(NAME python_wheel_install
           COMMAND ${CMAKE_COMMAND} -E env ${_ap_binding_env} AP_WHEEL_DIR=${PROJECT_BINARY_DIR}/wheel
                   ${AP_TEST_PYTHON} -m pytest -q -p no:cacheprovider ${CMAKE_CURRENT_SOURCE_DIR}/python/test_wheel_install.py)
  set_tests_properties(python_wheel_install PROPERTIES TIMEOUT 900 LABELS python COST 60
                       FIXTURES_REQUIRED ap_python_package)
  # The abi3 wheel (cp312-abi3: CPython 3.12 and newer; scripts/build_wheel.sh) built by the build
  # venv that scripts/setup_python.sh makes beside the project's (VENV/abi3-build), in its own tree
  # (python-package-cluster-abi3: an unchanged source tree compiles nothing again; about 90 s on 2
  # busy cores the first time), after python_package_install (both write cluster-deps' wrappers).
  # Without that venv it fails under CI=true and is skipped, saying why, elsewhere.
  get_filename_component(_ap_venv_dir "${AP_TEST_PYTHON}" DIRECTORY)
  get_filename_component(_ap_venv_dir "${_ap_venv_dir}" DIRECTORY)
  add_test(NAME python_wheel_abi3_build
           COMMAND ${CMAKE_COMMAND} -E env AP_WHEEL_PYTHON=${AP_TEST_PYTHON} AP_WHEEL_QUICK=1
                   AP_WHEEL_BUILD_PYTHON=${_ap_venv_dir}/abi3-build/bin/python
                   AP_CLUSTER_DEPS=${PROJECT_BINARY_DIR}/cluster-deps
                   bash -c "set -euo pipefail; if [[ ! -x \"$AP_WHEEL_BUILD_PYTHON\" ]]; then why=\"no build venv for the abi3 wheel at $AP_WHEEL_BUILD_PYTHON (scripts/setup_python.sh makes it from a Python 3.12 or 3.13; scripts/find_python.sh)\"; ci=\"\${CI:-}\"; if [[ \"\${ci,,}\" == true || \"$ci\" == 1 ]]; then echo \"$why\" >&2; exit 1; fi; echo \"SKIPPED: $why\"; exit 0; fi; \"$0\" \"$1\""
                   ${PROJECT_SOURCE_DIR}/scripts/build_wheel.sh ${PROJECT_BINARY_DIR}/wheel-abi3)
  set_tests_properties(python_wheel_abi3_build PROPERTIES TIMEOUT 1800 LABELS python SKIP_REGULAR_EXPRESSION "SKIPPED: "
                       FIXTURES_SETUP ap_wheel_abi3 FIXTURES_REQUIRED ap_python_package)
  # It installed into fresh 3.12 and 3.13 venvs offline, one analysis each with Debian's libraries
  # hidden against ap_analyze's CSV bytes, its symbol versions, and pip refusing the cp311 wheel on
  # 3.12 (test_wheel_abi3.py; about 50 s on 2 busy cores). The interpreters: scripts/find_python.sh.
  # A missing one (or wheel) fails under CI=true; elsewhere the parts that need it skip (pytest -rs
  # says why), and ctest reports the test skipped when all of them do.
  add_test(NAME python_wheel_abi3
           COMMAND ${CMAKE_COMMAND} -E env ${_ap_binding_env} AP_WHEEL_DIR=${PROJECT_BINARY_DIR}/wheel
                   AP_WHEEL_ABI3_DIR=${PROJECT_BINARY_DIR}/wheel-abi3
                   ${AP_TEST_PYTHON} -m pytest -q -rs -p no:cacheprovider ${CMAKE_CURRENT_SOURCE_DIR}/python/test_wheel_abi3.py)
  set_tests_properties(python_wheel_abi3 PROPERTIES TIMEOUT 900 LABELS python COST 50
                       SKIP_REGULAR_EXPRESSION "\n[0-9]+ skipped in "
                       FIXTURES_REQUIRED "ap_python_package;ap_wheel_abi3")
endif()
# The scripts that import the installed package when there is one (capture_qk.py takes
# attention_plasticity.capture from it) run after it is current.
set_tests_properties(python_capture_qk python_convert_sniffed_qk PROPERTIES FIXTURES_REQUIRED ap_python_package)
