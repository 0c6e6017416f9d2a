// Uses the installed headers the way a downstream toolkit would.
#include <attention_plasticity/ap.hpp>

#include <cmath>
#include <iostream>

int main()
{
    namespace ap = attention_plasticity;
    // Two keys that differ only along axis 0; the query is N(0, I): p = 1/2, PP = 1.
    xt::xtensor<double, 2> keys = {{1.0, 0.0}, {0.0, 0.0}};
    xt::xtensor<std::size_t, 1> first = {0};
    xt::xtensor<std::size_t, 1> second = {1};
    xt::xtensor<double, 1> mean = {0.0, 0.0};
    xt::xtensor<double, 2> cov = {{1.0, 0.0}, {0.0, 1.0}};
    const double pp = ap::head_plasticity(ap::key_differences(keys, first, second), mean, cov);
    std::cout << "consumer: PP = " << pp << "\n";
    return std::fabs(pp - 1.0) < 1e-15 ? 0 : 1;
}
