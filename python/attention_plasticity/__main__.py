"""``python -m attention_plasticity``: ap_analyze's command line, in Python.

The same flags, --config file, defaults, checks, messages, result set and exit statuses as
``build/examples/ap_analyze`` (its option table and run, through the compiled module), and
qk-sniffer's Parquet folders read directly (``l{LL}h{HH}{q|k}/data.parquet``). With
``--shard I/N`` it analyzes the heads of ``ap_analyze --shard I/N`` and writes the same files,
shard.json included (ap_merge merges shards of either). Progress is a tqdm bar on stderr when
stderr is a terminal.

``python -m attention_plasticity report INPUT... -o report.html`` writes one self-contained HTML
page (``attention_plasticity.report``): of a result folder, an ap_compare folder, a
PlasticityMonitor folder, or of several result folders compared (``--design``, ``--alpha``).
Exit status 0, or 2 with a message when an input cannot be read.

Exit status: 0 every present (selected) head analyzed, 1 some head failed or the set could
not be written, 2 a usage or configuration error, or an output folder that cannot be used
(nothing was analyzed); 130 interrupted (nothing was written).
"""

import sys

from ._core import __version__
from ._core.dump import DumpRun, analyze_help, blas_report
from .dump import _run

PROG = "python -m attention_plasticity"


def report_main(argv):
    """``report INPUT... -o FILE``: ap.report of the inputs (docs: the report module)."""
    import argparse

    from .report import QUANTITIES, report

    parser = argparse.ArgumentParser(
        prog=f"{PROG} report",
        description="Writes one self-contained HTML page (data, script and styles inline; no network) of a "
                    "result folder, an ap_compare folder, a PlasticityMonitor folder, or several result "
                    "folders compared head by head (docs/method.md §8.6).")
    parser.add_argument("inputs", nargs="+", metavar="INPUT", help="result, comparison or monitor folder(s)")
    parser.add_argument("-o", "--output", required=True, metavar="FILE", help="the HTML file to write")
    parser.add_argument("--title", default=None, help="the page's title")
    parser.add_argument("--quantity", default="ap_overall", choices=[q for q, _d, _s in QUANTITIES],
                        help="the map's first quantity [ap_overall]")
    parser.add_argument("--alpha", type=float, default=None, help="several inputs: the BH level [0.05]")
    parser.add_argument("--design", choices=["auto", "unpaired", "paired"], default=None,
                        help="several inputs: the comparison's design (docs/method.md §8.6) [auto]")
    parser.add_argument("--method-url", default=None, metavar="URL",
                        help="where docs/method.md can be read: definitions link to its sections [none: named]")
    args = parser.parse_args(argv)
    try:
        path = report(args.inputs if len(args.inputs) > 1 else args.inputs[0], args.output, title=args.title,
                      quantity=args.quantity, alpha=args.alpha, design=args.design,
                      method_url=args.method_url)
    except (ValueError, TypeError, OSError, RuntimeError) as exc:
        print(f"{PROG}: {exc}", file=sys.stderr, flush=True)
        return 2
    print(f"{PROG} report: wrote {path}", file=sys.stderr, flush=True)
    return 0


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["report"]:
        return report_main(argv[1:])

    def say(message):
        print(f"{PROG}: {message}", file=sys.stderr, flush=True)

    if "--version" in argv:  # as ap_analyze --version (run/cli_util.hpp: asks_version)
        print(f"{PROG} {__version__}")
        return 0
    try:
        run = DumpRun.from_command_line([PROG] + argv)
    except (ValueError, OSError, RuntimeError) as exc:
        say(exc)
        return 2
    if run is None:
        sys.stdout.write(analyze_help(PROG))
        return 0
    try:
        for note in run.notes():
            say(note)
        say(run.plan_line)
        # The kernels every front end runs with (docs/method.md §7.7), as ap_analyze reports them.
        print(blas_report(PROG), file=sys.stderr, flush=True)
        if run.shard_line is not None:
            say(run.shard_line)
        try:
            _run(run, progress=None, warn=False, report=True)
        except KeyboardInterrupt:
            say("interrupted; nothing was written")
            return 130
        # The set written (or not) and the closing report, ap_analyze's (run/run_report.hpp).
        lines, status = run.finish()
        for line in lines:
            say(line)
        return status
    finally:
        run.close()


if __name__ == "__main__":
    sys.exit(main())
