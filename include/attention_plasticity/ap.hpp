#ifndef ATTENTION_PLASTICITY_AP_HPP
#define ATTENTION_PLASTICITY_AP_HPP

// Umbrella header: every piece of attention_plasticity (docs/method.md for the method).
//   normal.hpp       Phi and 4p(1-p) with accurate tails
//   plasticity.hpp   the batched AP kernel (docs/method.md §4)
//   random.hpp       rng (xoshiro256**), normal variates, draws without replacement (§6)
//   sampler.hpp      the key-pair sampler and its per-bucket form (§5, §2.12)
//   tokens.hpp       the input of one head: views of queries and keys, head_id (§1)
//   seeds.hpp        every seed of a head (§2.15)
//   preparation.hpp  orientation signs and subsampling (§2.1-2.2)
//   kept_tokens.hpp  the rows of a head §2.2 keeps, read in place and oriented (§2.1)
//   regression.hpp   position regression, scalar predictability, component-0 fit, component
//                    weights (§2.3, §2.4, §2.6, §2.9)
//   rotation.hpp     the Householder map to the positional axis (§2.5)
//   moments.hpp      sample moments: skewness and excess kurtosis as SciPy (bias=False)
//   multiple_testing.hpp  Benjamini-Hochberg q-values and Holm's adjusted p-values (§8.6)
//   kolmogorov.hpp   the distributions of the Kolmogorov-Smirnov statistics, as SciPy
//   ks_test.hpp      the one-sample KS test against N(0, 1)
//   normality.hpp    the normality summaries of the method (§2.7, §2.8)
//   query_model.hpp  Gaussian query models, per-bucket statistics and models (§2.10)
//   cells.hpp        key buckets, eligible cells, cell key pairs, cell and bucket plasticity
//                    (§2.11-2.13)
//   aggregates.hpp   ap_overall, ap_first20, ap_last20, ap_drop (§2.14)
//   distance_maps.hpp  plasticity by inter-key and key-to-query distance (§8.1)
//   empirical.hpp    the model-free AP from the actual queries (§8.2)
//   sensitivity.hpp  how a bucket's AP_j responds to its query model; pair-sampling variance (§8.3)
//   intervals.hpp    standard errors, biases and intervals of AP_j and ap_overall (§8.3), with
//                    its parts uncertainty_design.hpp, standard_errors.hpp, pair_influences.hpp
//   head_steps.hpp   the joints of §2 for a caller composing the steps: kept, oriented rows,
//                    a bucket's cells, profile rows, aggregates from them, the metrics row
//   pipeline.hpp     analyze_head: all of §2 for one head (and the extensions of §8)

#include "aggregates.hpp"
#include "cells.hpp"
#include "comparison.hpp"
#include "distance_maps.hpp"
#include "empirical.hpp"
#include "head_steps.hpp"
#include "intervals.hpp"
#include "kept_tokens.hpp"
#include "kolmogorov.hpp"
#include "ks_test.hpp"
#include "moments.hpp"
#include "multiple_testing.hpp"
#include "normal.hpp"
#include "normality.hpp"
#include "pipeline.hpp"
#include "plasticity.hpp"
#include "preparation.hpp"
#include "query_model.hpp"
#include "random.hpp"
#include "regression.hpp"
#include "rotation.hpp"
#include "sampler.hpp"
#include "seeds.hpp"
#include "sensitivity.hpp"
#include "tokens.hpp"

#endif
