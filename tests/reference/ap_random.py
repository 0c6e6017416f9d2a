"""The library's random streams (docs/method.md §6) written independently in pure Python:
SplitMix64, mix_seed, xoshiro256** with Lemire's bounded integers and 53-bit uniforms,
Box-Muller normals, and the partial Fisher-Yates draw without replacement. Used by the
reference generators (gen_random_reference.py, gen_normality.py); never by the library.
"""

import math

MASK64 = (1 << 64) - 1


def splitmix64(state):
    """One SplitMix64 step: returns (new state, output)."""
    state = (state + 0x9E3779B97F4A7C15) & MASK64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return state, z ^ (z >> 31)


def mix_seed(seed, a=0, b=0, c=0):
    state, h = splitmix64(seed & MASK64)
    for x in (a, b, c):
        state = h ^ ((x + 0x632BE59BD9B4E019) & MASK64)
        state, h = splitmix64(state)
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
        """Lemire: the high half of x * bound, redrawn while the low half < 2^64 mod bound."""
        product = self.next() * bound
        low = product & MASK64
        if low < bound:
            threshold = ((1 << 64) - bound) % bound
            while low < threshold:
                product = self.next() * bound
                low = product & MASK64
        return product >> 64

    def uniform(self):
        return (self.next() >> 11) * 2.0 ** -53


def box_muller(seed, count):
    """count standard normals: r cos(2 pi u2), then r sin(2 pi u2), r = sqrt(-2 log(1 - u1))."""
    g = Xoshiro256ss(seed)
    out = []
    while len(out) < count:
        u1 = 1.0 - g.uniform()
        u2 = g.uniform()
        r = math.sqrt(-2.0 * math.log(u1))
        angle = 6.283185307179586476925 * u2
        out.extend([r * math.cos(angle), r * math.sin(angle)])
    return out[:count]


def sample_without_replacement(n, k, seed):
    """Partial Fisher-Yates of 0..n-1: the first k in draw order; all, in order, when k >= n."""
    idx = list(range(n))
    if k >= n:
        return idx
    g = Xoshiro256ss(seed)
    for i in range(k):
        j = i + g.below(n - i)
        idx[i], idx[j] = idx[j], idx[i]
    return idx[:k]
