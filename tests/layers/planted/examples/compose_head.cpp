// Planted: the tutorial includes run/ (check_include_graph.cmake must refuse it).
#include <attention_plasticity/io/reads_run.hpp>
#include <attention_plasticity/run/analysis_run.hpp>
