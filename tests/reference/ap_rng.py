"""The library's random streams written out in Python from their statement in
docs/method.md §6, for reference scripts that must reproduce a seeded draw exactly:
SplitMix64, mix_seed, xoshiro256** seeded by SplitMix64, Lemire's unbiased bounded integers
(below) and 53-bit uniforms. Nothing here is derived from the C++ code's output.
"""

MASK64 = (1 << 64) - 1
GOLDEN_GAMMA = 0x9E3779B97F4A7C15
MIX_INCREMENT = 0x632BE59BD9B4E019


def splitmix64(state):
    """One SplitMix64 step: returns (new state, output)."""
    state = (state + GOLDEN_GAMMA) & MASK64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return state, z ^ (z >> 31)


def mix_seed(seed, a=0, b=0, c=0):
    """A seed from a seed and up to three integers (negative ones as two's complement)."""
    _, h = splitmix64(seed & MASK64)
    for x in (a, b, c):
        state = h ^ (((x & MASK64) + MIX_INCREMENT) & MASK64)
        _, h = splitmix64(state)
    return h


class Xoshiro256ss:
    def __init__(self, seed):
        self.s = []
        state = seed & MASK64
        for _ in range(4):
            state, w = splitmix64(state)
            self.s.append(w)

    @staticmethod
    def rotl(x, k):
        return ((x << k) | (x >> (64 - k))) & MASK64

    def next(self):
        s = self.s
        result = (self.rotl((s[1] * 5) & MASK64, 7) * 9) & MASK64
        t = (s[1] << 17) & MASK64
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = self.rotl(s[3], 45)
        return result

    def below(self, bound):
        """Uniform integer in [0, bound) (Lemire: multiply, reject the biased low products)."""
        product = self.next() * bound
        low = product & MASK64
        if low < bound:
            threshold = ((1 << 64) - bound) % bound
            while low < threshold:
                product = self.next() * bound
                low = product & MASK64
        return product >> 64

    def uniform(self):
        """Uniform double in [0, 1) with 53 random bits."""
        return (self.next() >> 11) * 2.0 ** -53
