// The unit tests' main: the front ends' BLAS kernel policy first (docs/method.md §7.7), so that
// the tests run on the kernels and the single OpenBLAS thread that every front end uses.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <attention_plasticity/blas_policy.hpp>

int main(int argc, char* argv[])
{
    attention_plasticity::select_blas_kernels();
    return Catch::Session().run(argc, argv);
}
