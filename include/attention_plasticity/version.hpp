#ifndef ATTENTION_PLASTICITY_VERSION_HPP
#define ATTENTION_PLASTICITY_VERSION_HPP

// The project's version. Its one home is the top-level CMakeLists.txt
// (project(attention_plasticity VERSION ...)): the build defines AP_VERSION from it for every
// user of the attention_plasticity target (the installed CMake package too), the Python wheel
// takes its version from the same line (pyproject.toml), and the programs, the module's
// __version__, shard manifests and the result sets' run.json report it. Headers used without the
// CMake targets say "unversioned" rather than a number that may be wrong.

#ifndef AP_VERSION
#define AP_VERSION "unversioned"
#endif

namespace attention_plasticity
{
/// The version of the library these headers are, e.g. "0.1.0".
inline constexpr const char* version = AP_VERSION;
}  // namespace attention_plasticity

#endif
