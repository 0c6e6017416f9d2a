#include <attention_plasticity/ap.hpp>
#include <iostream>
#include <xtensor/xrandom.hpp>

int main()
{
    namespace ap = attention_plasticity;
    xt::random::seed(1);
    xt::xtensor<float, 2> keys = xt::random::randn<float>({1000, 64});   // your keys, one row per token
    xt::xtensor<int, 1> lengths = {400, 600};                             // two sequences, 400 + 600 keys
    xt::xtensor<double, 1> mu = xt::random::randn<double>({64});          // query model N(mu, Sigma)
    xt::xtensor<double, 2> sigma = xt::eye<double>(64);

    ap::rng generator(42);                                                // a seed fixes every pair
    ap::key_pairs pairs = ap::sample_key_pairs(lengths, 4096, 0.05, generator);
    xt::xtensor<std::size_t, 1> offset = xt::where(xt::equal(pairs.example, 0), 0, 400);
    xt::xtensor<std::size_t, 1> row1 = pairs.first + offset, row2 = pairs.second + offset;
    auto w = ap::key_differences<double>(keys, row1, row2);               // N x d, k1 - k2
    xt::xtensor<double, 1> pp = ap::pair_plasticity(w, mu, sigma);        // 4 p (1 - p) per pair
    std::cout << "head-level AP = " << ap::mean_plasticity(pp) << "\n";
}
