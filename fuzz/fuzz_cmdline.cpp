// libFuzzer target: the command line of ap_analyze (include/attention_plasticity/run/analyze_config.hpp through the
// table-driven parser of include/attention_plasticity/run/config.hpp), also as a program with positional arguments
// (ap_merge's form), the index lists of --layers/--heads, the --shard I/N values
// (include/attention_plasticity/run/shard_plan.hpp) and the folder names of a dump (include/attention_plasticity/run/dump_layout.hpp). The
// input is split at NUL bytes into arguments. Any exception other than usage_error, any
// crash or sanitizer report is a finding. (A --config argument reads that file: only
// regular files of at most 1 MiB.)

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <attention_plasticity/run/analyze_config.hpp>
#include <attention_plasticity/run/dump_layout.hpp>
#include <attention_plasticity/run/shard_plan.hpp>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    using namespace attention_plasticity::run;
    std::vector<std::string> args{"ap_analyze"};
    std::string current;
    for (std::size_t i = 0; i < size && args.size() < 64; ++i)
    {
        if (data[i] == 0)
        {
            args.push_back(current);
            current.clear();
        }
        else
        {
            current += static_cast<char>(data[i]);
        }
    }
    if (args.size() < 64)
    {
        args.push_back(current);
    }
    std::vector<const char*> argv;
    for (const auto& a : args)
    {
        argv.push_back(a.c_str());
        const parsed_folder_name name = parse_head_folder_name(a);
        if (name.is_head_folder && name.problem.empty() && head_folder_name(name.layer, name.head, name.kind) != a)
        {
            __builtin_trap();  // a name accepted as a head folder must be the canonical one
        }
        try
        {
            const shard_spec spec = parse_shard_spec("--shard", a);
            const shard_spec again = parse_shard_spec("--shard", spec.text());
            if (spec.count == 0 || spec.count > max_shards || spec.index >= spec.count || again.index != spec.index
                || again.count != spec.count)
            {
                __builtin_trap();
            }
        }
        catch (const usage_error&)
        {
        }
        index_set set;
        try
        {
            set = parse_index_set("--layers", a, max_layout_count - 1);
        }
        catch (const usage_error&)
        {
            continue;
        }
        if (set.empty() || set.largest() >= max_layout_count || !set.contains(set.largest()))
        {
            __builtin_trap();
        }
        // The canonical text parses back to the same set.
        if (parse_index_set("--layers", set.text(), max_layout_count - 1).ranges() != set.ranges())
        {
            __builtin_trap();
        }
    }
    try
    {
        (void)parse_analyze_command_line(static_cast<int>(argv.size()), argv.data());
    }
    catch (const usage_error&)
    {
    }
    try
    {
        analyze_config config;
        std::vector<std::string> positional;
        (void)parse_command_line(static_cast<int>(argv.size()), argv.data(), analyze_options(), config, false,
                                 &positional);
    }
    catch (const usage_error&)
    {
    }
    return 0;
}
