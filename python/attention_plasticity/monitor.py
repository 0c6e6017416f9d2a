"""Attention plasticity watched during training: ``PlasticityMonitor`` (issue 35).

``monitor = ap.PlasticityMonitor(texts, tokenizer, "plasticity/", every=100)`` and
``monitor.observe(model, step)`` in any PyTorch loop (``ap.integrations.PlasticityCallback`` for
transformers' Trainer). Each due observation profiles the model on the same probe examples with
the same token draws (profile_model's capture and analysis, docs/method.md §2, §8.3), writes the
step's result set and compares it, paired (§8.6), with the previous observation and with the
first. The folder it keeps::

    output_dir/
      plasticity_run.json       the run file: the fingerprint of the probe and the options, and one
                                entry per observation (step, folder, times, scalars, changes)
      step_000100/ ...          one result set per observation (ap_compare / read_results read it)
      trajectory.csv            compare_trajectory's rows of every observation, in order, with step
      changes.csv               per observation: heads changed against the previous and the first
      changes/step_000200_vs_previous/, changes/step_000200_vs_first/
                                compare_runs' tables (compare_heads, compare_changed, ...; design paired)
      trajectory.png            ap.plots.monitor_trajectory of the folder (plot=False: none)
"""

import concurrent.futures
import hashlib
import json
import math
import os
import random
import tempfile
import time
import warnings

import numpy as np

RUN_FILE = "plasticity_run.json"
TRAJECTORY_FILE = "trajectory.csv"
CHANGES_FILE = "changes.csv"
PLOT_FILE = "trajectory.png"
FORMAT = 1
# Options that do not change the numbers (the analysis is the same on any number of threads,
# docs/method.md §2.15): left out of the fingerprint, so a resumed run may change them.
_UNFINGERPRINTED = ("threads",)
# The scalars of an observation (monitor.scalars(), the Trainer's logs, log_to): name -> where from.
SCALAR_QUANTITIES = ("ap_overall", "ap_first20", "ap_last20", "ap_drop")


def _step_name(step):
    return f"step_{int(step):06d}"


def _rank():
    """This process's rank in torch.distributed (0 when it is not initialized)."""
    try:
        import torch.distributed as dist
    except ImportError:  # pragma: no cover
        return 0
    if dist.is_available() and dist.is_initialized():
        return int(dist.get_rank())
    return 0


def _write_atomic(path, text):
    """``text`` into ``path`` whole: a temporary file beside it, renamed over it."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _plain(value):
    """A JSON-able form of an option value (for the fingerprint)."""
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    return repr(value)


def _strict_json(value):
    """``value`` with every non-finite float replaced by None (JSON has no NaN or Infinity)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _strict_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_strict_json(v) for v in value]
    return value


def save_training_state(model):
    """What an observation could change and restores: every module's training flag and the
    random states (Python's random, NumPy's global generator, torch's CPU generator and, when
    CUDA is initialized, every CUDA device's)."""
    import torch
    state = {"modes": [(m, m.training) for m in model.modules()],
             "python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_training_state(state):
    """Puts back what save_training_state saved."""
    import torch
    for module, mode in state["modes"]:
        module.training = mode
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state:
        torch.cuda.set_rng_state_all(state["cuda"])


class Observation:
    """One observation: ``step``, ``folder`` (its result set), ``capture_seconds``,
    ``analysis_seconds`` (the analysis, the comparisons and the writing), ``scalars``
    ({name: float}: the model-level means and errors, the heads changed; the names
    monitor.log_to and the Trainer's logs use, without the ``plasticity/`` prefix), ``changes``
    ({"previous" | "first": {"step", "compared_heads", "heads_changed"}}), ``errors`` (the heads
    that failed)."""

    def __init__(self, step, folder, capture_seconds, analysis_seconds, scalars, changes, errors=()):
        self.step, self.folder = int(step), folder
        self.capture_seconds, self.analysis_seconds = float(capture_seconds), float(analysis_seconds)
        self.scalars, self.changes, self.errors = dict(scalars), dict(changes), list(errors)

    def to_dict(self):
        return {"step": self.step, "folder": os.path.basename(self.folder),
                "capture_seconds": self.capture_seconds, "analysis_seconds": self.analysis_seconds,
                "scalars": self.scalars, "changes": self.changes,
                "errors": [str(e) for e in self.errors]}

    def __repr__(self):
        return (f"Observation(step {self.step}: capture {self.capture_seconds:.2f} s, analysis "
                f"{self.analysis_seconds:.2f} s, ap_overall_mean {self.scalars.get('ap_overall_mean', float('nan')):.4f}, "
                f"heads_changed {self.scalars.get('heads_changed', 'n/a')})")


class PlasticityMonitor:
    """Watches attention plasticity during training, paired across steps (issue 35).

    ``PlasticityMonitor(texts, tokenizer, output_dir, every=100, **options)``, then
    ``monitor.observe(model, step)`` in the loop: it does nothing unless ``step`` is due (a
    multiple of ``every``; ``observe`` at step 0 before training gives the baseline).

    ``texts``, ``tokenizer``, ``max_seq_len``, ``max_examples``, ``batch_size``, ``seed``,
    ``example_seed``, ``token_seed``, ``capture_preset``, ``head_options`` and the options
    (keywords) are profile_model's (``seed`` sets the other two and the analysis' streams). They
    are fixed here, at construction: the texts are cut into examples and ``max_examples`` of them
    drawn, spread over the documents (``example_seed``; each observation records the examples'
    documents and fingerprints, so that the pairing is checked), the tokens kept drawn with
    ``token_seed``, and the capture settings (the notebook preset's sampling) chosen once, so
    every observation reads the same examples under the same example ids and keeps the same tokens
    (the draws are seeded per example id, §2.15): consecutive observations compare ``paired``
    (docs/method.md §8.6), which needs ``sequence_influences="on"`` (the default here).

    Each observation (see the module's help for the folder):

    - runs the model in eval mode under torch.no_grad (the capture's forward passes, on the model's
      device, under whatever autocast the caller is in; the kept vectors are copied to float32, so
      bf16 weights and autocast work), then restores every module's training flag and the random
      states (Python, NumPy's global generator, torch CPU and CUDA generators); it does not touch
      the optimizer, the gradients, the data order or the autocast state. With gradient
      accumulation, observe after the optimizer step (the gradients are left as they are anyway);
    - writes ``step_NNNNNN/`` (a result set), compares it paired with the previous observation and
      with the first (``changes/``, ``changes.csv``), appends its rows to ``trajectory.csv``
      (compare_trajectory's: the model-level means over heads with their errors, per layer and
      all), rewrites ``plasticity_run.json`` whole (a temporary file renamed) and, unless
      ``plot=False``, ``trajectory.png``;
    - reports its times: ``Observation.capture_seconds`` and ``analysis_seconds``.

    ``background=True``: the analysis, the comparisons and the writing run in a worker thread (the
    C++ analysis and comparison release the GIL) while training goes on; the capture stays in the
    caller's thread (it needs the model at this step). At most one observation is pending: the
    next ``observe`` waits for the previous one. ``close()`` (also on leaving a ``with`` block, and
    the Trainer callback at the end of training) waits for the last. In the background, set
    ``threads`` (e.g. 1) so that the analysis leaves the training its cores.

    Distributed runs (torch.distributed initialized): only rank 0 observes; on the other ranks
    ``observe`` returns at once, without a barrier or any collective call, so they never wait for
    the observation (they only meet rank 0 again at their next collective, e.g. the gradient
    all-reduce, where they wait at most the observation's capture time, and not even that with
    ``background=True`` for the analysis). Nothing is written on other ranks.

    Resuming: a monitor on an ``output_dir`` that holds a run file continues its series (the
    steps already observed are skipped: observations resume after the last). It raises
    ``ValueError`` naming what differs when the probe examples (a SHA-256 of their token ids) or
    the options differ from the stored ones.

    ``alpha``: the false discovery rate of the comparisons (a head changed when a quantity's
    Benjamini-Hochberg q <= alpha). Memory: the kept rows of one observation (two while one is
    analyzed in the background).
    """

    def __init__(self, texts, tokenizer, output_dir, *, every=100, background=False, plot=True, alpha=0.05,
                 max_seq_len=512, max_examples=None, batch_size=1, seed=0, example_seed=None, token_seed=None,
                 capture_preset="notebook", head_options=None, warn=False, **options):
        """See the class's help. Raises ValueError naming the argument when an option is refused,
        or, on an output_dir with a run file, what differs from the stored run."""
        from . import documents as _documents
        from . import profile as _profile
        from .qk_sniffer import CaptureError

        function = "PlasticityMonitor"
        if isinstance(every, bool) or not isinstance(every, (int, np.integer)) or every < 1:
            raise ValueError(f"{function}: every {every!r}: give an integer >= 1 (observe every that many steps)")
        if options.get("sequence_influences", "on") != "on":
            raise ValueError(f"{function}: sequence_influences {options['sequence_influences']!r}: the monitor "
                             f"compares observations paired, which needs sequence_influences 'on'")
        options["sequence_influences"] = "on"
        self.every, self.background, self.plot, self.alpha = int(every), bool(background), bool(plot), float(alpha)
        self.output_dir = os.fspath(output_dir)
        self.warn = bool(warn)
        try:
            example_seed, token_seed, seed = _profile.resolve_seeds(seed, example_seed, token_seed, function)
            options["seed"] = seed  # the analysis' streams (and, below, replaced: the capture's token draws)
            capture_kw, self._run_kw, self._head_options = _profile._split_options(options, head_options, function)
            capture_kw["seed"] = token_seed
            if max_examples is not None and (isinstance(max_examples, bool)
                                             or not isinstance(max_examples, (int, np.integer)) or max_examples < 1):
                raise CaptureError(f"{function}: max_examples {max_examples!r}: give an integer >= 1, or None")
            for name, value, low in (("max_seq_len", max_seq_len, 2), ("batch_size", batch_size, 1)):
                if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
                    raise CaptureError(f"{function}: {name} {value!r}: give an integer >= {low}")
            examples = _profile._token_examples(tokenizer, texts, max_seq_len, function)
            if not len(examples):
                raise CaptureError(f"{function}: the texts have no tokens")
            total, n_texts = len(examples), examples.texts
            examples = examples.take(_documents.choose_examples(examples.chunks_per_document, max_examples,
                                                                example_seed))
            self.examples = examples.tokens
            self.examples_csv = examples.csv()  # every observation's examples.csv: pairing is checked
            self.capture_record = _profile.capture_record(
                examples, example_seed=example_seed, token_seed=token_seed, max_examples=max_examples,
                texts=(n_texts, total), function=function, warn=self.warn)
            self._sniff = _profile._capture_options(capture_kw, capture_preset, max_seq_len,
                                                    sum(map(len, self.examples)), self._run_kw,
                                                    self._head_options, function)
        except CaptureError as exc:
            raise ValueError(str(exc)) from None
        self.batch_size = int(batch_size)
        self._pad_id = 0 if tokenizer is None else _profile._pad_id(tokenizer)
        head_fields = {} if self._head_options is None else {
            n: _plain(getattr(self._head_options, n)) for n, v in vars(type(self._head_options)).items()
            if isinstance(v, property)}
        self.fingerprint = {
            "probe_examples_sha256": hashlib.sha256(json.dumps(self.examples).encode()).hexdigest(),
            "probe_examples": len(self.examples),
            "probe_tokens": int(sum(map(len, self.examples))),
            "options": {"max_seq_len": int(max_seq_len), "max_examples": _plain(max_examples),
                        "example_seed": example_seed, "token_seed": token_seed,
                        "capture_preset": capture_preset, "alpha": self.alpha,
                        **{k: _plain(v) for k, v in sorted(options.items()) if k not in _UNFINGERPRINTED},
                        "head_options": head_fields},
        }
        self.observations = []
        self._trajectory = None  # pandas DataFrame of the rows so far
        self._changes = []
        self._pending = None
        self._executor = None
        self._writer = None
        self._skipped_warned = False
        self._unlogged = []  # observations whose scalars the Trainer callback has not logged yet
        self.active = _rank() == 0
        if self.active:
            os.makedirs(self.output_dir, exist_ok=True)
            self._resume()

    # ------------------------------------------------------------------ resume

    @property
    def run_file(self):
        """The path of the run file (plasticity_run.json in output_dir)."""
        return os.path.join(self.output_dir, RUN_FILE)

    def _resume(self):
        import pandas as pd
        if not os.path.exists(self.run_file):
            self._write_run_file()
            return
        with open(self.run_file, encoding="utf-8") as f:
            stored = json.load(f)
        old = stored.get("fingerprint", {})
        if old.get("probe_examples_sha256") != self.fingerprint["probe_examples_sha256"]:
            raise ValueError(
                f"PlasticityMonitor: output_dir {self.output_dir!r} holds a run on other probe texts: the "
                f"probe examples' fingerprint (SHA-256 of their token ids) is {self.fingerprint['probe_examples_sha256'][:16]}... "
                f"({self.fingerprint['probe_examples']} examples, {self.fingerprint['probe_tokens']} tokens), the "
                f"stored run's {str(old.get('probe_examples_sha256'))[:16]}... ({old.get('probe_examples')} examples, "
                f"{old.get('probe_tokens')} tokens); give the same texts, tokenizer, max_seq_len, max_examples and "
                f"seed to continue it, or another output_dir")
        a, b = old.get("options", {}), self.fingerprint["options"]
        differ = sorted(k for k in set(a) | set(b) if a.get(k, "<unset>") != b.get(k, "<unset>"))
        if differ:
            said = "; ".join(f"{k}: stored {a.get(k, '<unset>')!r}, given {b.get(k, '<unset>')!r}" for k in differ)
            raise ValueError(f"PlasticityMonitor: output_dir {self.output_dir!r} holds a run with other options "
                             f"({said}); give the stored options to continue it, or another output_dir")
        for entry in stored.get("observations", []):
            self.observations.append(Observation(entry["step"], os.path.join(self.output_dir, entry["folder"]),
                                                 entry["capture_seconds"], entry["analysis_seconds"],
                                                 {k: float("nan") if v is None else v
                                                  for k, v in entry["scalars"].items()},
                                                 entry["changes"], entry.get("errors", ())))
        path = os.path.join(self.output_dir, TRAJECTORY_FILE)
        if self.observations and os.path.exists(path):
            frame = pd.read_csv(path, keep_default_na=True, dtype={"layer": str})
            self._trajectory = frame[frame["step"].isin([o.step for o in self.observations])]
        path = os.path.join(self.output_dir, CHANGES_FILE)
        if self.observations and os.path.exists(path):
            steps = {o.step for o in self.observations}
            self._changes = [r for r in pd.read_csv(path).to_dict("records") if r["step"] in steps]

    def _write_run_file(self):
        body = {"format": FORMAT, "every": self.every, "fingerprint": self.fingerprint,
                "steps": [o.step for o in self.observations],
                "observations": [o.to_dict() for o in self.observations]}
        # Strict JSON (no NaN token, which JSON readers such as io/json.hpp refuse): a scalar
        # without a value (no head with an estimate) is written null and read back as NaN.
        _write_atomic(self.run_file, json.dumps(_strict_json(body), indent=1, sort_keys=False, allow_nan=False) + "\n")

    # ------------------------------------------------------------------ observing

    @property
    def steps(self):
        """The steps observed so far (the pending one not yet included)."""
        return [o.step for o in self.observations]

    def due(self, step):
        """Whether ``observe(model, step)`` would observe: a multiple of ``every``, after the last
        step observed, on rank 0."""
        step = int(step)
        if not self.active or step % self.every:
            return False
        last = self._last_step()
        return last is None or step > last

    def _last_step(self):
        last = self.observations[-1].step if self.observations else None
        if self._pending is not None:
            last = self._pending_step
        return last

    def observe(self, model, step, *, force=False):
        """Observes ``model`` at ``step`` when due (``force=True``: whenever it is after the last
        observation). Returns the Observation (None when not due, or with ``background=True``:
        then see ``observations`` / ``latest`` after ``wait()``)."""
        import torch
        from .qk_sniffer import MemorySink, run_capture

        step = int(step)
        if not self.active:
            return None
        last = self._last_step()
        if last is not None and step <= last:
            if step % self.every == 0 or force:
                if not self._skipped_warned and self.observations and step <= self.observations[-1].step:
                    warnings.warn(f"PlasticityMonitor.observe: step {step} is not after the last step observed "
                                  f"({last}) in {self.output_dir!r}: skipped (a resumed run continues the series "
                                  f"after it)", stacklevel=2)
                    self._skipped_warned = True
            return None
        if step % self.every and not force:
            return None
        self.wait()  # at most one pending observation
        state = save_training_state(model)
        start = time.perf_counter()
        sink = MemorySink()
        try:
            model.eval()
            with torch.no_grad():
                plan, layers, tokens = run_capture(model, self.examples, sink, self._sniff,
                                                   batch_size=self.batch_size, pad_id=self._pad_id)
        finally:
            restore_training_state(state)
        capture_seconds = time.perf_counter() - start
        if not self.background:
            return self._analyze(step, sink, plan, layers, tokens, capture_seconds)
        if self._executor is None:
            self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="ap-monitor")
        self._pending_step = step
        self._pending = self._executor.submit(self._analyze, step, sink, plan, layers, tokens, capture_seconds)
        return None

    def wait(self):
        """Waits for the pending observation (background=True); raises what it raised. Returns its
        Observation, or None when none was pending."""
        pending, self._pending = self._pending, None
        return None if pending is None else pending.result()

    def close(self):
        """Flushes the pending observation and stops the worker. Safe to call twice."""
        try:
            self.wait()
        finally:
            if self._executor is not None:
                self._executor.shutdown(wait=True)
                self._executor = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    @property
    def latest(self):
        """The last finished Observation (None before the first)."""
        return self.observations[-1] if self.observations else None

    def _analyze(self, step, sink, plan, layers, tokens, capture_seconds):
        import pandas as pd
        from .compare import compare_runs
        from .profile import ModelProfile, analyze_in_memory

        start = time.perf_counter()
        name = _step_name(step)
        folder = os.path.join(self.output_dir, name)
        with warnings.catch_warnings():
            if not self.warn:
                warnings.simplefilter("ignore")
            run, errors = analyze_in_memory(sink, plan, layers, self._head_options, self._run_kw, progress=False,
                                            warn=self.warn, function="PlasticityMonitor.observe",
                                            examples_csv=self.examples_csv, capture_json=self.capture_record)
        del sink
        profile = ModelProfile(run, errors, plan, layers, tokens, self._sniff, examples_csv=self.examples_csv,
                               capture_record=self.capture_record)
        if not profile.write(folder):
            raise RuntimeError(f"PlasticityMonitor.observe: step {step}: no head was analyzed "
                               f"({len(errors)} failed: {errors[0] if errors else 'no head planned'})")
        changes, scalars = {}, {}
        previous = self.observations[-1] if self.observations else None
        first = self.observations[0] if self.observations else None
        against = [("previous", previous)] + ([("first", first)] if first is not None and first is not previous else [])
        trajectory_rows = None
        for label, other in against:
            if other is None:
                continue
            out = os.path.join(self.output_dir, "changes", f"{name}_vs_{label}")
            result = compare_runs([other.folder, folder], names=[_step_name(other.step), name], alpha=self.alpha,
                                  design="paired", output_dir=out)
            changes[label] = {"step": other.step, "compared_heads": int(result.compared_heads),
                              "heads_changed": int(result.changed_heads), "design": "paired",
                              "folder": os.path.relpath(out, self.output_dir)}
            self._changes.append({"step": step, "against": label, "against_step": other.step, "design": "paired",
                                  "alpha": self.alpha, "compared_heads": int(result.compared_heads),
                                  "heads_changed": int(result.changed_heads)})
            if label == "previous":
                trajectory_rows = result.trajectory[result.trajectory["set"] == name]
        if previous is None:
            # The first observation's means: compare_runs' trajectory rows of the set (its own
            # rows; a comparison of the set with itself gives them, its changes are not used).
            result = compare_runs([folder, folder], names=[name, name + "_again"], alpha=self.alpha,
                                  design="unpaired")
            trajectory_rows = result.trajectory[result.trajectory["set"] == name]
        rows = trajectory_rows.copy()
        rows.insert(0, "step", step)
        rows["order"] = len(self.observations)
        self._trajectory = rows if self._trajectory is None else pd.concat([self._trajectory, rows], ignore_index=True)
        for quantity in SCALAR_QUANTITIES:
            row = rows[(rows["quantity"] == quantity) & rows["layer"].isna()]  # the model-level rows
            if len(row):
                scalars[f"{quantity}_mean"] = float(row["mean"].iloc[0])
                scalars[f"{quantity}_se"] = float(row["se"].iloc[0])
        if "previous" in changes:
            scalars["heads_changed"] = changes["previous"]["heads_changed"]
        if "first" in changes or "previous" in changes:
            scalars["heads_changed_vs_first"] = changes.get("first", changes.get("previous"))["heads_changed"]
        scalars["heads_analyzed"] = int(profile.analyzed)
        scalars["heads_failed"] = int(profile.failed)
        scalars["capture_seconds"] = float(capture_seconds)
        _write_atomic(os.path.join(self.output_dir, TRAJECTORY_FILE), self._trajectory.to_csv(index=False))
        if self._changes:
            _write_atomic(os.path.join(self.output_dir, CHANGES_FILE), pd.DataFrame(self._changes).to_csv(index=False))
        if self.plot:
            self._plot()
        analysis_seconds = time.perf_counter() - start  # the analysis, comparisons, tables and plot
        scalars["analysis_seconds"] = float(analysis_seconds)
        observation = Observation(step, folder, capture_seconds, analysis_seconds, scalars, changes, errors)
        self.observations.append(observation)
        self._write_run_file()
        self._unlogged.append(observation)
        if self._writer is not None:
            self._log_scalars(self._writer, observation)
        return observation

    def _plot(self):
        from .plots import monitor_trajectory
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        fig = monitor_trajectory(self.output_dir)
        path = os.path.join(self.output_dir, PLOT_FILE)
        tmp = path + ".tmp.png"
        FigureCanvasAgg(fig).print_png(tmp)
        os.replace(tmp, path)

    # ------------------------------------------------------------------ scalars

    def scalars(self, observation=None, prefix="plasticity/"):
        """{prefix + name: value} of an observation (default the latest): the model-level means and
        standard errors of ap_overall, ap_first20, ap_last20, ap_drop (``*_mean``, ``*_se``),
        ``heads_changed`` (against the previous observation, q <= alpha), ``heads_changed_vs_first``,
        ``heads_analyzed``, ``heads_failed``, ``capture_seconds``, ``analysis_seconds``."""
        observation = observation or self.latest
        if observation is None:
            return {}
        return {prefix + k: v for k, v in observation.scalars.items()}

    def log_to(self, writer, prefix="plasticity/"):
        """Writes every observation's scalars, as it finishes, to ``writer``: anything with
        ``add_scalar(tag, value, global_step)`` (a ``torch.utils.tensorboard.SummaryWriter``);
        the observations made before are written now. Returns the monitor."""
        if not callable(getattr(writer, "add_scalar", None)):
            raise TypeError(f"PlasticityMonitor.log_to: writer: {type(writer).__name__} has no add_scalar(tag, "
                            f"value, global_step) (a torch.utils.tensorboard.SummaryWriter has)")
        self._writer, self._prefix = writer, prefix
        for observation in self.observations:
            self._log_scalars(writer, observation)
        return self

    def _log_scalars(self, writer, observation):
        for tag, value in self.scalars(observation, getattr(self, "_prefix", "plasticity/")).items():
            writer.add_scalar(tag, value, observation.step)
        if callable(getattr(writer, "flush", None)):
            writer.flush()

    def take_unlogged(self):
        """The observations finished since the last call (for the Trainer callback's logs)."""
        out, self._unlogged = self._unlogged, []
        return out

    def __repr__(self):
        return (f"PlasticityMonitor({self.output_dir!r}, every={self.every}, {len(self.examples)} probe examples, "
                f"{len(self.observations)} observations{', background' if self.background else ''})")
