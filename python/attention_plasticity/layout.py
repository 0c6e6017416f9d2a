"""qk-sniffer's dump layout (docs/method.md §1.2): one folder per captured (layer, head, kind),
``l{LL}h{HH}q`` / ``l{LL}h{HH}k``, each holding ``data.parquet``. The one home of these names for
the capture that writes the layout (``qk_sniffer``), the reader (``sniffed``) and the in-memory
run (``profile``)."""

import re

PARQUET_NAME = "data.parquet"
HEAD_FOLDER_RE = re.compile(r"^l(\d{2,})h(\d{2,})([qk])$")


def head_folder(layer, head, kind):
    """The folder name of (layer, head, kind): l{LL}h{HH}{q|k}, two digits at least."""
    return "l%02dh%02d%s" % (layer, head, kind)


def parse_head_folder(name):
    """(layer, head, kind) of a folder name l{LL}h{HH}{q|k}, or None."""
    m = HEAD_FOLDER_RE.match(name)
    return None if m is None else (int(m.group(1)), int(m.group(2)), m.group(3))
