#ifndef ATTENTION_PLASTICITY_IO_RESULT_FILE_HPP
#define ATTENTION_PLASTICITY_IO_RESULT_FILE_HPP

// A file of a result set before it is written: the tables of csv_rows.hpp make them, the run
// layer's result_set_writer writes them.

#include <string>
#include <string_view>
#include <vector>

namespace attention_plasticity::io
{
/// One file of a set: its name in the output folder and its bytes, in pieces.
struct result_file
{
    std::string name;
    std::vector<std::string_view> pieces;
};
}  // namespace attention_plasticity::io

#endif
