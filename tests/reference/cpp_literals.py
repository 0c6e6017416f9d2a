"""C++ literals for the generated reference headers (core_reference.hpp, steps_reference.hpp):
doubles as the shortest repr that round-trips, integer arrays, flat arrays with offsets."""

import math

import numpy as np


def lit(x, nan_name=None):
    """A double literal; NaN only where the header defines `nan_name` for it."""
    x = float(x)
    if math.isnan(x):
        assert nan_name is not None, "NaN in a reference that does not allow it"
        return nan_name
    assert math.isfinite(x), x
    return repr(x)


def _flat(values):
    return list(np.asarray(values).ravel()) if isinstance(values, np.ndarray) else list(values)


def array(name, values, ctype="double", per_line=4, nan_name=None):
    values = _flat(values)
    if not values:
        return "inline constexpr {} {}[1] = {{}};  // empty\n".format(ctype, name)
    body = []
    for i in range(0, len(values), per_line):
        chunk = values[i:i + per_line]
        if ctype == "double":
            body.append("    " + ", ".join(lit(v, nan_name) for v in chunk) + ",")
        elif ctype == "std::uint64_t":
            body.append("    " + ", ".join("{}u".format(int(v)) for v in chunk) + ",")
        else:
            body.append("    " + ", ".join(str(int(v)) for v in chunk) + ",")
    return "inline constexpr {} {}[] = {{\n{}\n}};\n".format(ctype, name, "\n".join(body))


def scalar(name, value, ctype="double", nan_name=None):
    if ctype == "double":
        return "inline constexpr double {} = {};\n".format(name, lit(value, nan_name))
    if ctype == "std::uint64_t":
        return "inline constexpr std::uint64_t {} = {}u;\n".format(name, int(value))
    return "inline constexpr {} {} = {};\n".format(ctype, name, int(value))


def flat_with_offsets(name, lists, ctype="std::size_t"):
    """The lists one after the other in `name`, and where each starts in `name`_offsets."""
    flat = [v for lst in lists for v in lst]
    offsets = [0]
    for lst in lists:
        offsets.append(offsets[-1] + len(lst))
    return array(name, flat, ctype, 10) + array(name + "_offsets", offsets, "std::size_t", 10)
