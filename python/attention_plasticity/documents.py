"""Documents as the sampling unit (docs/method.md §1.1, §8.3): one home for what every capture
path records of its examples and for how examples are chosen from documents.

- ``fingerprint(ids)``: 16 lowercase hex digits, a 64-bit BLAKE2b hash of token ids (int64
  little-endian bytes): the same token ids give the same fingerprint on every machine;
- ``examples_csv(example_id, document_id, chunk, fingerprint, document_fingerprint)``: the text
  of a dump's ``examples.csv`` (one row per example: the document it was cut from, its 0-based
  place among that document's chunks, the fingerprint of its full token ids and of the whole
  document's);
- ``cut_documents(tokenizer, texts, max_seq_len, document_ids=None)``: texts (strings or token
  ids) cut into examples, each with its document, chunk and fingerprints (``Examples``);
- ``choose_examples(chunks_per_document, max_examples, example_seed)``: which examples a capture
  keeps: the documents in an order drawn with the seed, one chunk of each (drawn) first, then a
  further chunk of each in the same order, and so on (never the first chunks in text order);
- ``effective_documents(tokens_by_document)``: 1 / sum of the squared shares of the kept tokens
  by document, and ``warn_effective_documents`` (a DocumentsWarning when it is below
  ``FEW_DOCUMENTS``, saying what to do).
"""

import hashlib
import warnings
from dataclasses import dataclass, field

import numpy as np

# The columns of examples.csv, in order (docs/method.md §1.1; its reader and the result set's
# writer are the C++ io/ layer's).
EXAMPLES_COLUMNS = ("example_id", "document_id", "chunk", "fingerprint", "document_fingerprint")
EXAMPLES_FILE = "examples.csv"
# The rule of choose_examples, as recorded in the result set's run.json "capture".
CHOICE_RULE = "documents_round_robin"
ALL_RULE = "all"
# Below this effective number of documents, warn_effective_documents warns.
FEW_DOCUMENTS = 10
# np.random.default_rng([example_seed, STREAM_EXAMPLES]) draws which examples are kept (this
# module imports nothing of the package: attention_plasticity.capture takes the stream from here).
STREAM_EXAMPLES = 1


class DocumentsWarning(UserWarning):
    """Few effective documents: the sequence-level errors rest on few independent units."""


def fingerprint(ids):
    """16 lowercase hex digits: blake2b (8-byte digest) of the token ids as int64 little-endian."""
    return hashlib.blake2b(np.asarray(ids, dtype="<i8").tobytes(), digest_size=8).hexdigest()


def _exact_int(value, what):
    """int(value) for an integer (Python or NumPy), never through a float."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"examples_csv: {what} {value!r} is not an integer")
    return int(value)


def _hex(value, what):
    if value is None or value == "":
        return ""
    if not isinstance(value, str) or len(value) != 16 or any(c not in "0123456789abcdef" for c in value):
        raise ValueError(f"examples_csv: {what} {value!r} is not 16 lowercase hex digits (or empty)")
    return value


def examples_csv(example_id, document_id, chunk, fingerprint=None, document_fingerprint=None):
    """The text of examples.csv (docs/method.md §1.1): the header, then one row per example,
    sorted by example_id, ``\\n`` line ends. ``fingerprint`` / ``document_fingerprint``: 16 hex
    digits per example, or None (or empty strings) where unknown. ValueError for lists of
    different lengths, a repeated example id, a non-integer id, a negative chunk or bad hex."""
    n = len(example_id)
    fingerprint = [None] * n if fingerprint is None else list(fingerprint)
    document_fingerprint = [None] * n if document_fingerprint is None else list(document_fingerprint)
    columns = (list(example_id), list(document_id), list(chunk), fingerprint, document_fingerprint)
    for name, values in zip(EXAMPLES_COLUMNS, columns):
        if len(values) != n:
            raise ValueError(f"examples_csv: {name}: {len(values)} values for {n} example ids")
    rows = []
    for i in range(n):
        example = _exact_int(columns[0][i], f"example_id[{i}]")
        document = _exact_int(columns[1][i], f"document_id[{i}]")
        place = _exact_int(columns[2][i], f"chunk[{i}]")
        if place < 0:
            raise ValueError(f"examples_csv: chunk[{i}] {place}: must be >= 0")
        rows.append((example, document, place, _hex(columns[3][i], f"fingerprint[{i}]"),
                     _hex(columns[4][i], f"document_fingerprint[{i}]")))
    rows.sort(key=lambda row: row[0])
    for a, b in zip(rows, rows[1:]):
        if a[0] == b[0]:
            raise ValueError(f"examples_csv: example_id {a[0]} is given twice")
    return "".join([",".join(EXAMPLES_COLUMNS) + "\n"] + [",".join(map(str, row)) + "\n" for row in rows])


def choose_examples(chunks_per_document, max_examples, example_seed):
    """Indices of the examples kept, in text order (document by document, chunk by chunk: the
    examples numbered as cut_documents numbers them), ``max_examples`` of sum(chunks_per_document)
    (all when None or larger). The documents are put in an order drawn with ``example_seed``;
    then, round after round, each document in that order that has chunks left gives one more,
    drawn among its chunks not yet kept, until max_examples are kept: the first round keeps one
    chunk of as many documents as max_examples allows (docs/method.md §8.3)."""
    counts = [int(c) for c in chunks_per_document]
    if any(c < 0 for c in counts):
        raise ValueError(f"choose_examples: chunks_per_document holds a negative count ({min(counts)})")
    total = sum(counts)
    if max_examples is None or max_examples >= total:
        return np.arange(total)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64) if counts else np.zeros(0, np.int64)
    rng = np.random.default_rng([int(example_seed), STREAM_EXAMPLES])
    order = rng.permutation(len(counts))
    # each document's chunks in a drawn order: round r takes the r-th of them
    chunk_orders = {d: rng.permutation(counts[d]) for d in order if counts[d]}
    kept = []
    for round_ in range(max(counts)):
        for d in order:
            if len(kept) == max_examples:
                return np.sort(np.asarray(kept, dtype=np.int64))
            if round_ < counts[d]:
                kept.append(int(starts[d] + chunk_orders[d][round_]))
    return np.sort(np.asarray(kept, dtype=np.int64))


def effective_documents(tokens_by_document):
    """1 / sum over documents of share**2, share = a document's tokens / all tokens (float64);
    ``tokens_by_document``: a sequence of token counts or a mapping document -> count. Equals the
    number of documents when they hold equal tokens, less when a few dominate; NaN without tokens."""
    values = tokens_by_document.values() if hasattr(tokens_by_document, "values") else tokens_by_document
    counts = np.asarray(list(values), dtype=np.float64)
    total = counts.sum()
    if not total > 0:
        return float("nan")
    share = counts / total
    return float(1.0 / np.sum(share * share))


def few_documents_message(value, documents, function, threshold=FEW_DOCUMENTS):
    """What warn_effective_documents says when ``value`` is below ``threshold``, else None."""
    if not (np.isfinite(value) and value < threshold):
        return None
    return (f"{function}: the kept tokens come from {documents} document(s), {value:.1f} effective "
            f"(1 / sum of the squared shares of the kept tokens by document; docs/method.md §8.3): "
            f"the sequence-level errors rest on that few independent units and are coarse. Give "
            f"more texts, a larger max_examples (or None: all chunks), or shorter documents (split "
            f"long texts into independent documents, e.g. by section)")


def warn_effective_documents(value, documents, function, stacklevel=2, threshold=FEW_DOCUMENTS):
    """A DocumentsWarning when ``value`` (effective_documents of the kept tokens) is below
    ``threshold``, naming it and the number of ``documents``, and saying what to do. Returns
    whether it warned."""
    message = few_documents_message(value, documents, function, threshold)
    if message is not None:
        warnings.warn(message, DocumentsWarning, stacklevel=stacklevel + 1)
    return message is not None


@dataclass
class Examples:
    """Examples cut from documents: ``tokens`` (token id lists as the model reads them),
    per example its ``document_id``, ``chunk`` (0-based place among its document's chunks),
    ``fingerprint`` (of its full token ids) and ``document_fingerprint`` (of the whole document's
    token ids); ``chunks_per_document``: in document order, the count of chunks of each."""
    tokens: list = field(default_factory=list)
    document_id: list = field(default_factory=list)
    chunk: list = field(default_factory=list)
    fingerprint: list = field(default_factory=list)
    document_fingerprint: list = field(default_factory=list)
    chunks_per_document: list = field(default_factory=list)

    def __len__(self):
        return len(self.tokens)

    def take(self, indices):
        """The examples at ``indices`` (chunks_per_document: those kept of each document)."""
        indices = [int(i) for i in indices]
        out = Examples(*([getattr(self, n)[i] for i in indices]
                         for n in ("tokens", "document_id", "chunk", "fingerprint", "document_fingerprint")))
        kept = {}
        for d in out.document_id:
            kept[d] = kept.get(d, 0) + 1
        out.chunks_per_document = list(kept.values())
        return out

    def csv(self, example_ids=None):
        """examples.csv of these examples under ``example_ids`` (default 0, 1, ...)."""
        ids = list(range(len(self))) if example_ids is None else list(example_ids)
        return examples_csv(ids, self.document_id, self.chunk, self.fingerprint, self.document_fingerprint)

    def tokens_by_document(self, tokens_per_example=None):
        """{document_id: tokens} of these examples (``tokens_per_example``: the kept tokens of
        each, default their lengths)."""
        counts = [len(t) for t in self.tokens] if tokens_per_example is None else tokens_per_example
        out = {}
        for d, n in zip(self.document_id, counts):
            out[d] = out.get(d, 0) + int(n)
        return out


def frame_of(tokenizer):
    """(head, tail): the special tokens around each example as the model reads a sequence:
    [CLS] ... [SEP] for an encoder's tokenizer (one with both), else <bos> ... when the tokenizer
    has a beginning-of-sequence token, else nothing."""
    cls, sep = getattr(tokenizer, "cls_token_id", None), getattr(tokenizer, "sep_token_id", None)
    bos = getattr(tokenizer, "bos_token_id", None)
    if cls is not None and sep is not None:
        return [cls], [sep]
    return ([] if bos is None else [bos]), []


def cut_documents(tokenizer, documents, max_seq_len, document_ids=None, where="--max-seq-len", error=ValueError):
    """Examples of ``documents`` (a list of token id lists, or of strings when ``tokenizer`` is
    given: tokenized without special tokens), each cut into consecutive pieces of at most
    ``max_seq_len`` tokens (with the tokenizer's frame_of around each piece; token ids without a
    tokenizer are cut as they are). ``document_ids``: one integer per document (default its index).
    A document without tokens gives no example; ``error`` (the caller's exception type) when
    max_seq_len leaves no room for text."""
    head, tail = frame_of(tokenizer) if tokenizer is not None else ([], [])
    room = max_seq_len - len(head) - len(tail)
    if room < 1:
        raise error(f"{where} {max_seq_len} leaves no room for text")
    if document_ids is None:
        document_ids = range(len(documents))
    out = Examples()
    for doc, text in zip(document_ids, documents):
        ids = tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"] \
            if isinstance(text, str) else text
        ids = [int(t) for t in ids]
        whole = fingerprint(ids) if ids else None
        pieces = [head + ids[start:start + room] + tail for start in range(0, len(ids), room)]
        for place, piece in enumerate(pieces):
            out.tokens.append(piece)
            out.document_id.append(int(doc))
            out.chunk.append(place)
            out.fingerprint.append(fingerprint(piece))
            out.document_fingerprint.append(whole)
        if pieces:
            out.chunks_per_document.append(len(pieces))
    return out
