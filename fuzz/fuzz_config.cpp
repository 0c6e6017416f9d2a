// libFuzzer target: the YAML configuration of ap_analyze (include/attention_plasticity/run/config.hpp with the option
// table of include/attention_plasticity/run/analyze_config.hpp), the dump's metadata.json (include/attention_plasticity/run/dump_layout.hpp),
// a shard's manifest shard.json (include/attention_plasticity/run/shard_manifest.hpp) and the JSON reader they all
// use (include/attention_plasticity/io/json.hpp) on arbitrary text. The first byte picks which (modulo 4:
// 0 configuration, 1 metadata, 2 manifest, 3 JSON). Any exception other than the parser's own
// (usage_error, merge_error, io::input_error), any crash or sanitizer report is a finding; so is a
// manifest that, written back, does not read back the same, and a JSON value that, printed, does
// not read back the same.

#include <cstddef>
#include <cstdint>
#include <string>

#include <attention_plasticity/io/json.hpp>
#include <attention_plasticity/run/analyze_config.hpp>
#include <attention_plasticity/run/dump_layout.hpp>
#include <attention_plasticity/run/shard_manifest.hpp>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    using namespace attention_plasticity::run;
    if (size == 0)
    {
        return 0;
    }
    const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
    try
    {
        if (data[0] % 4 == 3)
        {
            namespace io = attention_plasticity::io;
            const io::json value = io::parse_json(text, "fuzz.json").value;
            if (io::parse_json(value.dump(), "fuzz.json").value != value)
            {
                __builtin_trap();  // what the reader accepts, printed, must read back the same
            }
        }
        else if (data[0] % 4 == 1)
        {
            (void)parse_dump_metadata(text, "metadata.json");
        }
        else if (data[0] % 4 == 2)
        {
            const std::string written = manifest_json(parse_manifest(text, "shard.json"));
            if (manifest_json(parse_manifest(written, "shard.json")) != written)
            {
                __builtin_trap();  // what a manifest writes must read back the same
            }
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
    catch (const merge_error&)
    {
    }
    catch (const attention_plasticity::io::input_error&)
    {
    }
    return 0;
}
