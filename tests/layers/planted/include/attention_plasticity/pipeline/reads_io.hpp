// Planted: the pipeline includes io/ (check_include_graph.cmake must refuse it).
#include "../io/reads_run.hpp"
