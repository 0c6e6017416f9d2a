#ifndef ATTENTION_PLASTICITY_AP_HPP
#define ATTENTION_PLASTICITY_AP_HPP

// Umbrella header: every piece of attention_plasticity.
//   normal.hpp       Phi and 4p(1-p) with accurate tails
//   plasticity.hpp   the batched AP kernel (seed 000)
//   sampler.hpp      the key-pair sampler (seed 001) and its per-bucket form
//   regression.hpp   OLS on position, scalar position predictability
//   rotation.hpp     the Householder map to the positional axis
//   normality.hpp    skewness, kurtosis, exact Kolmogorov-Smirnov, subspace summaries
//   query_model.hpp  Gaussian query models, per-bucket statistics
//   pipeline.hpp     the whole per-head analysis of SPEC §2

#include "normal.hpp"
#include "normality.hpp"
#include "pipeline.hpp"
#include "plasticity.hpp"
#include "query_model.hpp"
#include "regression.hpp"
#include "rotation.hpp"
#include "sampler.hpp"

#endif
