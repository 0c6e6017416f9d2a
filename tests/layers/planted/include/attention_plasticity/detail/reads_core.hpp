// Planted: detail/ includes a public core header (check_include_graph.cmake must refuse it).
#include "../core_reads_io.hpp"
#include "matrix.hpp"
