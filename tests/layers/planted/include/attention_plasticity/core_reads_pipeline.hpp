// Planted: the core includes the pipeline (check_include_graph.cmake must refuse it), as
// head_steps.hpp did when kept_tokens.hpp was under pipeline/.
#include "pipeline/kept_rows.hpp"
