# examples/compose_head (docs/method.md §2 composed from the public steps) writes the same bytes
# as analyze_head for every head of the small dump: float32 and float64 queries and keys in
# each combination, with defaults, and subsampled (--max-tokens 200 of 256 rows) with a seed and
# 2 threads against analyze_head on 1. And the comparison can fail: another seed differs.
#   cmake -DCOMPOSE_HEAD=<exe> -DDUMP=<small_dump> -DWORK_DIR=<dir> -P test_compose_head.cmake
foreach(var COMPOSE_HEAD DUMP WORK_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "test_compose_head.cmake: ${var} is not set")
  endif()
endforeach()
file(REMOVE_RECURSE ${WORK_DIR})
set(tables head_metrics head_bucket_plasticity head_profile head_component_weights head_distance_plasticity)

# Runs compose_head on head (0, q_head, k_head) into WORK_DIR/<name> with the options given.
function(run name q_head k_head)
  execute_process(COMMAND ${COMPOSE_HEAD} ${DUMP} 0 ${q_head} ${k_head} ${WORK_DIR}/${name} ${ARGN}
                  RESULT_VARIABLE result)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "compose_head ${q_head} ${k_head} ${ARGN} failed (${result})")
  endif()
endfunction()

# Sets <out> to the tables that differ between WORK_DIR/<a> and WORK_DIR/<b>.
function(differing out a b)
  set(differ "")
  foreach(table ${tables})
    file(READ ${WORK_DIR}/${a}/${table}.csv left)
    file(READ ${WORK_DIR}/${b}/${table}.csv right)
    if(NOT left STREQUAL right)
      list(APPEND differ ${table})
    endif()
  endforeach()
  set(${out} "${differ}" PARENT_SCOPE)
endfunction()

# Each query head with its key head (GQA groups of 2): q0 f32/k0 f32, q1 f64 (sliding
# window)/k0 f32, q2 f32/k1 f64, q3 f64 (sliding window)/k1 f64.
foreach(pair "0;0" "1;0" "2;1" "3;1")
  list(GET pair 0 q)
  list(GET pair 1 k)
  run(q${q}_composed ${q} ${k})
  run(q${q}_analyzed ${q} ${k} --analyze)
  run(q${q}_composed_sub ${q} ${k} --max-tokens 200 --seed 5 --threads 2)
  run(q${q}_analyzed_sub ${q} ${k} --max-tokens 200 --seed 5 --threads 1 --analyze)
  run(q${q}_composed_seed6 ${q} ${k} --max-tokens 200 --seed 6)
  file(STRINGS ${WORK_DIR}/q${q}_analyzed/head_profile.csv profile)
  list(LENGTH profile rows)
  if(rows LESS 3)
    message(FATAL_ERROR "head ${q}: analyze_head gave ${rows} profile lines; the comparison needs buckets")
  endif()
  differing(differ q${q}_composed q${q}_analyzed)
  if(differ)
    message(FATAL_ERROR "head ${q}: compose_head differs from analyze_head in ${differ}")
  endif()
  differing(differ q${q}_composed_sub q${q}_analyzed_sub)
  if(differ)
    message(FATAL_ERROR "head ${q}, subsampled, seed 5: compose_head differs from analyze_head in ${differ}")
  endif()
  # Another seed draws other rows and pairs: the comparison sees it.
  differing(differ q${q}_composed_seed6 q${q}_analyzed_sub)
  if(NOT differ MATCHES "head_metrics")
    message(FATAL_ERROR "head ${q}: seed 6 gave the head_metrics of seed 5; the comparison cannot fail")
  endif()
endforeach()
message(STATUS "compose_head wrote analyze_head's tables, byte for byte, for the 4 heads of the small dump")
