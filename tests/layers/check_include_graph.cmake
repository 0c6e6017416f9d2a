# The layer lines of the include graph (issues 26, 34), read from the #include lines of the sources:
#   detail <- core (include/attention_plasticity/*.hpp) <- pipeline (pipeline.hpp, pipeline/ and
#   the umbrella ap.hpp) <- io/ <- run/ <- front ends.
# A header may include headers of its own layer and of the layers below it, never above: detail/
# holds bottom helpers that include no public header, the core (the steps of docs/method.md and
# the joints between them) no pipeline, io/ or run/, the pipeline (analyze_head, the composition
# of the steps) no io/ or run/, io/ no run/.
# The tutorial examples/compose_head.cpp and benchmarks/bench_head.cpp read a dump with the core,
# the pipeline and io/ only (no run/).
#
# cmake -DSOURCE_DIR=<tree> -P check_include_graph.cmake; exits non-zero and names every
# violation as "<file> includes <header> (<layer> above <layer>)". The tests run it on the source
# tree and on tests/layers/planted, a tree of planted violations that it must find.

if(NOT SOURCE_DIR)
  message(FATAL_ERROR "check_include_graph: give -DSOURCE_DIR=<source tree>")
endif()
set(include_root ${SOURCE_DIR}/include/attention_plasticity)
set(layer_names detail core pipeline io run front)

# The layer (its rank in layer_names) of a path under include/attention_plasticity; front for
# anything else.
function(layer_of path out)
  file(RELATIVE_PATH rel ${include_root} ${path})
  if(rel MATCHES "^\\.\\./")
    set(${out} 5 PARENT_SCOPE)
  elseif(rel MATCHES "^detail/")
    set(${out} 0 PARENT_SCOPE)
  elseif(rel MATCHES "^pipeline/" OR rel STREQUAL "pipeline.hpp" OR rel STREQUAL "ap.hpp")
    set(${out} 2 PARENT_SCOPE)
  elseif(rel MATCHES "^io/")
    set(${out} 3 PARENT_SCOPE)
  elseif(rel MATCHES "^run/")
    set(${out} 4 PARENT_SCOPE)
  else()
    set(${out} 1 PARENT_SCOPE)
  endif()
endfunction()

# The project headers `file` includes, as absolute paths: "x.hpp" relative to the file, and
# <attention_plasticity/x.hpp> under include/.
function(project_includes file out)
  file(STRINGS ${file} lines REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"]")
  get_filename_component(dir ${file} DIRECTORY)
  set(found)
  foreach(line IN LISTS lines)
    if(line MATCHES "^[ \t]*#[ \t]*include[ \t]*\"([^\"]+)\"")
      get_filename_component(target ${CMAKE_MATCH_1} ABSOLUTE BASE_DIR ${dir})
      list(APPEND found ${target})
    elseif(line MATCHES "^[ \t]*#[ \t]*include[ \t]*<attention_plasticity/([^>]+)>")
      list(APPEND found ${include_root}/${CMAKE_MATCH_1})
    endif()
  endforeach()
  set(${out} ${found} PARENT_SCOPE)
endfunction()

set(violations)
file(GLOB_RECURSE headers ${include_root}/*.hpp)
foreach(header IN LISTS headers)
  layer_of(${header} own)
  project_includes(${header} targets)
  foreach(target IN LISTS targets)
    layer_of(${target} theirs)
    if(theirs GREATER own)
      list(GET layer_names ${own} own_name)
      list(GET layer_names ${theirs} their_name)
      file(RELATIVE_PATH a ${SOURCE_DIR} ${header})
      file(RELATIVE_PATH b ${include_root} ${target})
      list(APPEND violations "${a} includes ${b} (${their_name} above ${own_name})")
    endif()
  endforeach()
endforeach()

# The programs that read a dump with the core, the pipeline and io/ only.
foreach(program examples/compose_head.cpp benchmarks/bench_head.cpp)
  if(NOT EXISTS ${SOURCE_DIR}/${program})
    continue()
  endif()
  project_includes(${SOURCE_DIR}/${program} targets)
  foreach(target IN LISTS targets)
    layer_of(${target} theirs)
    if(theirs GREATER 3)
      file(RELATIVE_PATH b ${include_root} ${target})
      list(APPEND violations "${program} includes ${b} (it may include the core, the pipeline and io/ only)")
    endif()
  endforeach()
endforeach()

list(LENGTH headers header_count)
if(header_count EQUAL 0)
  message(FATAL_ERROR "check_include_graph: no headers under ${include_root}")
endif()
if(violations)
  list(LENGTH violations count)
  string(REPLACE ";" "\n  " text "${violations}")
  message(FATAL_ERROR "check_include_graph: ${count} include(s) cross a layer line upward:\n  ${text}")
endif()
message(STATUS "check_include_graph: ${header_count} headers, no include crosses a layer line upward")
