// Planted: the core includes io/ (check_include_graph.cmake must refuse it).
#include <attention_plasticity/io/reads_run.hpp>
