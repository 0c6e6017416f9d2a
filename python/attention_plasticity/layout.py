"""The dump layout's names (docs/method.md §1.1, §1.2): one folder per captured (layer, head,
kind), ``l{LL}h{HH}q`` / ``l{LL}h{HH}k`` (numbers two-digit, zero-padded, more digits only when
the number needs them), holding ``data.parquet`` (qk-sniffer) or the NPY files. The one home of
these names in Python: the capture that writes the layout (``qk_sniffer``, ``examples/
capture_qk.py``), the readers (``sniffed``, ``examples/convert_sniffed_qk.py``) and the in-memory
run (``profile``). The C++ home is ``include/attention_plasticity/io/dump_folder.hpp``; both
read ``tests/data/dump_folder_names.txt`` in their tests and agree on every name there."""

import re

PARQUET_NAME = "data.parquet"
# Layers, query heads and key heads are each at most this many (io::max_layout_count).
MAX_LAYOUT_COUNT = 10000
# A name that looks like a head folder: l<digits>h<digits>{q|k}. Whether it is one in the
# layout's format (or cannot be used) is parse_head_folder's.
HEAD_FOLDER_RE = re.compile(r"^l([0-9]+)h([0-9]+)([qk])$")


def head_folder(layer, head, kind):
    """The folder name of (layer, head, kind): l{LL}h{HH}{q|k}, two digits at least."""
    return "l%02dh%02d%s" % (layer, head, kind)


def _limit_problem(what, digits):
    shown = digits[:24] + "..." if len(digits) > 24 else digits
    return f"{what} number {shown} is above the limit {MAX_LAYOUT_COUNT - 1}"


def parse_head_folder(name):
    """(layer, head, kind) of a head folder's name, None for a name that is no head folder
    (``notes``, ``l00h00x``, ``l00h00q.bak``). A name that looks like one but cannot be used
    raises ValueError with the reason, in the words of the C++ reader (io::parse_head_folder_name):
    a number above MAX_LAYOUT_COUNT - 1, or not in the format (``l0h0q``, ``l000h00q``)."""
    m = HEAD_FOLDER_RE.match(name)
    if m is None:
        return None
    for what, digits in (("layer", m.group(1)), ("head", m.group(2))):
        if int(digits) >= MAX_LAYOUT_COUNT:
            raise ValueError(_limit_problem(what, digits))
    layer, head, kind = int(m.group(1)), int(m.group(2)), m.group(3)
    expected = head_folder(layer, head, kind)
    if name != expected:
        raise ValueError(f"not in the dump's format (expected '{expected}': numbers two-digit, "
                         f"zero-padded, without further leading zeros)")
    return layer, head, kind
