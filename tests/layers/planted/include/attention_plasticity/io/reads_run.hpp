// Planted: io/ includes run/ (check_include_graph.cmake must refuse it).
#include "../run/errors.hpp"
