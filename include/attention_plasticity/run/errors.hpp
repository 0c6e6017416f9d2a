#ifndef ATTENTION_PLASTICITY_RUN_ERRORS_HPP
#define ATTENTION_PLASTICITY_RUN_ERRORS_HPP

// The errors of the run layer, each with the exit status the front ends give it.

#include <stdexcept>

namespace attention_plasticity::run
{
/// A bad command line or configuration: exit status 2.
class usage_error : public std::runtime_error
{
public:
    using std::runtime_error::runtime_error;
};

/// The output folder cannot be used (before any work) or a set cannot be written.
class output_error : public std::runtime_error
{
public:
    using std::runtime_error::runtime_error;
};

/// Shards that cannot be merged, or a manifest that cannot be read: exit status 2 of ap_merge.
class merge_error : public std::runtime_error
{
public:
    using std::runtime_error::runtime_error;
};

/// Result sets that cannot be compared (nothing is written): a usage error of the front ends
/// (ap_compare's exit status 2, Python's UsageError).
class compare_error : public usage_error
{
public:
    using usage_error::usage_error;
};
}  // namespace attention_plasticity::run

#endif
