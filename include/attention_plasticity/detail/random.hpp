#ifndef ATTENTION_PLASTICITY_DETAIL_RANDOM_HPP
#define ATTENTION_PLASTICITY_DETAIL_RANDOM_HPP

// Transition only: the random streams moved to the public <attention_plasticity/random.hpp>.
// Include that header instead; this one will be removed.

#include "../random.hpp"

#endif
