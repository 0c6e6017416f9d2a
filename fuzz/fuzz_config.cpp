// libFuzzer target: the YAML configuration of ap_analyze (examples/config.hpp with the option
// table of examples/analyze_config.hpp) and the dump's metadata.json
// (examples/dump_layout.hpp) on arbitrary text. The first byte picks which. Any exception
// other than usage_error, any crash or sanitizer report is a finding.

#include <cstddef>
#include <cstdint>
#include <string>

#include "analyze_config.hpp"
#include "dump_layout.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    using namespace ap_examples;
    if (size == 0)
    {
        return 0;
    }
    const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
    try
    {
        if (data[0] & 1)
        {
            (void)parse_dump_metadata(text, "metadata.json");
        }
        else
        {
            analyze_config config;
            apply_yaml(config, analyze_options(), text, "fuzz.yaml");
        }
    }
    catch (const usage_error&)
    {
    }
    return 0;
}
