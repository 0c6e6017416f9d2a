# The Python that runs the Python and end-to-end tests (tests/python, tests/e2e); included by
# tests/CMakeLists.txt and examples/CMakeLists.txt. Sets, in the including directory:
#   AP_TEST_PYTHON       the interpreter ("" when there is none)
#   AP_TEST_PYTHON_FULL  ON when it is meant to have every package of requirements.txt
#                        (pyarrow, torch, transformers, the real model): the tests that need
#                        them are registered and FAIL when a package is missing.
# AP_PYTHON = auto (default): the project's virtual environment .venv (created by
# scripts/setup_python.sh) when it exists, else /usr/bin/python3 with Debian's packages, where
# only the tests needing numpy, scipy, pandas and matplotlib are registered. Any other value
# is the path of the interpreter to use, taken as complete.
# Build trees configured before AP_PYTHON had "auto" cached it as a FILEPATH to
# /usr/bin/python3 (and AP_TEST_PYTHON beside it): start them on auto.
get_property(_ap_python_type CACHE AP_PYTHON PROPERTY TYPE)
if(_ap_python_type STREQUAL "FILEPATH")
  set(AP_PYTHON "auto" CACHE STRING "" FORCE)
  unset(AP_TEST_PYTHON CACHE)
endif()
set(AP_PYTHON "auto" CACHE STRING
    "Python for the tests: auto (.venv when it exists, else /usr/bin/python3) or a path")
set(_ap_venv_python "${PROJECT_SOURCE_DIR}/.venv/bin/python")
set(_ap_python_note "")
if(AP_PYTHON STREQUAL "auto")
  if(EXISTS "${_ap_venv_python}")
    set(AP_TEST_PYTHON "${_ap_venv_python}")
    set(AP_TEST_PYTHON_FULL ON)
  else()
    set(AP_TEST_PYTHON_FULL OFF)
    if(EXISTS "/usr/bin/python3")
      set(AP_TEST_PYTHON "/usr/bin/python3")
    else()
      find_package(Python3 COMPONENTS Interpreter QUIET)
      set(AP_TEST_PYTHON "${Python3_EXECUTABLE}")
    endif()
    string(CONCAT _ap_python_note "no ${_ap_venv_python} (run scripts/setup_python.sh first): the tests "
        "that need pyarrow, torch or the real model (Parquet reader and converter, capture, "
        "real-model end to end) are NOT registered")
    if(NOT AP_TEST_PYTHON)
      set(AP_TEST_PYTHON "")
      string(APPEND _ap_python_note "; no Python 3 at all: no Python test is registered")
    else()
      string(APPEND _ap_python_note "; the other Python tests run with ${AP_TEST_PYTHON}")
    endif()
  endif()
else()
  if(NOT EXISTS "${AP_PYTHON}")
    message(FATAL_ERROR "AP_PYTHON=${AP_PYTHON}: no such file (use auto or a Python 3 path)")
  endif()
  set(AP_TEST_PYTHON "${AP_PYTHON}")
  set(AP_TEST_PYTHON_FULL ON)
endif()
get_property(_ap_python_reported GLOBAL PROPERTY AP_PYTHON_REPORTED)
if(NOT _ap_python_reported)
  set_property(GLOBAL PROPERTY AP_PYTHON_REPORTED ON)
  if(_ap_python_note)
    message(STATUS "attention_plasticity: ${_ap_python_note}")
  else()
    message(STATUS "attention_plasticity: Python tests run with ${AP_TEST_PYTHON}")
  endif()
endif()
