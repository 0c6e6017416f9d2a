#ifndef ATTENTION_PLASTICITY_AP_HPP
#define ATTENTION_PLASTICITY_AP_HPP

// Umbrella header: every piece of attention_plasticity.
//   normal.hpp       Phi and 4p(1-p) with accurate tails
//   plasticity.hpp   the batched AP kernel (docs/method.md §4)
//   random.hpp       rng (xoshiro256**), normal variates, draws without replacement (§6)
//   sampler.hpp      the key-pair sampler and its per-bucket form (§5, §2.12)
//   regression.hpp   OLS on position, scalar position predictability
//   rotation.hpp     the Householder map to the positional axis
//   moments.hpp      sample moments: skewness and excess kurtosis as SciPy (bias=False)
//   kolmogorov.hpp   the distributions of the Kolmogorov-Smirnov statistics, as SciPy
//   ks_test.hpp      the one-sample KS test against N(0, 1)
//   normality.hpp    the normality summaries of the method (§2.7, §2.8)
//   query_model.hpp  Gaussian query models, per-bucket statistics
//   pipeline.hpp     the whole per-head analysis of docs/method.md §2

#include "kolmogorov.hpp"
#include "ks_test.hpp"
#include "moments.hpp"
#include "normal.hpp"
#include "normality.hpp"
#include "pipeline.hpp"
#include "plasticity.hpp"
#include "query_model.hpp"
#include "random.hpp"
#include "regression.hpp"
#include "rotation.hpp"
#include "sampler.hpp"

#endif
