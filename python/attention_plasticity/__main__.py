"""``python -m attention_plasticity``: ap_analyze's command line, in Python.

The same flags, --config file, defaults, checks, messages, result set and exit statuses as
``build/examples/ap_analyze`` (its option table and run, through the compiled module), and
qk-sniffer's Parquet folders read directly (``l{LL}h{HH}{q|k}/data.parquet``). With
``--shard I/N`` it analyzes the heads of ``ap_analyze --shard I/N`` and writes the same files,
shard.json included (ap_merge merges shards of either). Progress is a tqdm bar on stderr when
stderr is a terminal.

Exit status: 0 every present (selected) head analyzed, 1 some head failed or the set could
not be written, 2 a usage or configuration error, or an output folder that cannot be used
(nothing was analyzed); 130 interrupted (nothing was written).
"""

import sys

from ._core import __version__
from ._core.dump import DumpRun, analyze_help, blas_report
from .dump import _run

PROG = "python -m attention_plasticity"


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)

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
