#!/usr/bin/python3
"""A sharded analysis on a real Slurm cluster (docs/method.md §8.4): the scripts of
examples/slurm submit the array job and the merge job with sbatch, and the merged CSVs are
byte-identical to an unsharded run.

usage: test_slurm.py AP_SYNTH AP_ANALYZE SUBMIT_SH WORK_DIR      (ap_merge beside ap_analyze)

The test starts a one-node cluster of its own, as root: munged (a key generated in a temporary
folder, its own socket), slurmctld and slurmd in the foreground with a minimal slurm.conf
written there (proctrack/linuxproc, task/none, select/cons_tres with CR_Core, the node as
`slurmd -C` describes it, state and spool folders in the temporary folder, free ports), then
  1. submits 3 shards with examples/slurm/submit.sh while shard 1 cannot write its folder
     (a file `.ap_results` is in its way): tasks 0 and 2 complete, task 1 fails (exit 2), the
     merge job still runs (afterany), refuses (exit 2) and names shard 1 as not finished;
  2. reruns shard 1 as examples/README.md says (submit.sh --only 1): the new merge job
     completes and OUT's CSVs equal the unsharded run's, byte for byte.
The cluster is torn down whatever happens (jobs cancelled, daemons stopped, then no process
that uses the cluster's folder may remain). Without root or without the Slurm and MUNGE
programs the test reports itself skipped (exit 77) and says why.
"""

import ctypes
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util as u  # noqa: E402

PROGRAMS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "scancel", "sinfo")
JOB_TIMEOUT = 180  # seconds for the jobs of one submission to leave the queue


def skip(reason):
    print("SKIP: " + reason)
    sys.exit(u.SKIP)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def die_with_parent():
    """In the child before exec: SIGTERM when the test process dies (even by SIGKILL)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    os.setsid()


class Cluster:
    """A one-node Slurm cluster in a temporary folder; stop() tears everything down."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="ap-slurm-")
        os.chmod(self.dir, 0o755)
        self.daemons = []
        self.conf = os.path.join(self.dir, "slurm.conf")
        self.env = dict(os.environ, SLURM_CONF=self.conf)

    def path(self, *parts):
        return os.path.join(self.dir, *parts)

    def run(self, args, check=True):
        proc = subprocess.run(args, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True, timeout=60)
        if check and proc.returncode != 0:
            raise AssertionError("%s exited %d: %s%s" % (" ".join(args), proc.returncode, proc.stdout, proc.stderr))
        return proc

    def start_daemon(self, name, args):
        log = open(self.path("log", name + ".out"), "w")
        proc = subprocess.Popen(args, env=self.env, stdout=log, stderr=subprocess.STDOUT, preexec_fn=die_with_parent)
        self.daemons.append((name, proc, log))
        return proc

    def start(self):
        for sub in ("munge", "state", "spool", "log"):
            os.makedirs(self.path(sub))
        os.chmod(self.path("munge"), 0o755)
        os.makedirs(self.path("munge_key"), mode=0o700)
        key = self.path("munge_key", "munge.key")
        with open(key, "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(key, 0o400)
        socket_path = self.path("munge", "munge.socket")
        self.start_daemon("munged", ["munged", "--foreground", "--force", "--socket=" + socket_path,
                                     "--key-file=" + key, "--pid-file=" + self.path("munge", "munged.pid"),
                                     "--log-file=" + self.path("log", "munged.log"),
                                     "--seed-file=" + self.path("munge", "munged.seed")])
        self.wait_for(lambda: os.path.exists(socket_path), 20, "munged's socket")

        # The node as slurmd sees it: "NodeName=vm CPUs=2 Boards=1 ... RealMemory=24105".
        node = subprocess.run(["slurmd", "-C"], stdout=subprocess.PIPE, universal_newlines=True,
                              check=True).stdout.splitlines()[0].strip()
        name = re.match(r"NodeName=(\S+)", node).group(1)
        with open(self.path("plugstack.conf"), "w"):
            pass
        conf = """ClusterName=aptest
SlurmctldHost={name}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={socket}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/builtin
ReturnToService=2
MinJobAge=600
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmctldLogFile={d}/log/slurmctld.log
SlurmdLogFile={d}/log/slurmd.log
PlugStackConfig={d}/plugstack.conf
MailProg=/bin/true
{node} NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=test Nodes={name} Default=YES MaxTime=INFINITE State=UP
""".format(name=name, ctld_port=free_port(), slurmd_port=free_port(), socket=socket_path, d=self.dir, node=node)
        with open(self.conf, "w") as f:
            f.write(conf)
        print("slurm.conf:\n" + conf)
        self.start_daemon("slurmctld", ["slurmctld", "-D", "-i"])
        self.wait_for(lambda: self.run(["scontrol", "ping"], check=False).stdout.find("UP") >= 0, 30, "slurmctld")
        self.start_daemon("slurmd", ["slurmd", "-D"])

        def node_idle():
            out = self.run(["sinfo", "-h", "-N", "-o", "%T"], check=False).stdout.split()
            return out == ["idle"]
        self.wait_for(node_idle, 60, "the node to be idle")

    def wait_for(self, ready, seconds, what):
        deadline = time.time() + seconds
        while time.time() < deadline:
            for name, proc, _ in self.daemons:
                if proc.poll() is not None:
                    raise AssertionError("%s exited %d while waiting for %s" % (name, proc.returncode, what))
            if ready():
                return
            time.sleep(0.2)
        raise AssertionError("timed out after %d s waiting for %s" % (seconds, what))

    def wait_for_jobs(self):
        self.wait_for(lambda: self.run(["squeue", "-h", "-o", "%i"]).stdout.strip() == "", JOB_TIMEOUT,
                      "the jobs to end")

    def job_states(self, job):
        """{array task id or None: (state, exit code)} of a job, from scontrol."""
        out = self.run(["scontrol", "-o", "show", "job", job]).stdout
        states = {}
        for line in out.splitlines():
            task = re.search(r"\bArrayTaskId=(\d+)", line)
            state = re.search(r"\bJobState=(\S+)", line).group(1)
            code = re.search(r"\bExitCode=(\d+):\d+", line).group(1)
            states[int(task.group(1)) if task else None] = (state, int(code))
        return states

    def our_processes(self):
        """pids of processes other than this one that use the cluster's folder (command line,
        environment or working directory)."""
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            try:
                with open("/proc/%s/cmdline" % entry, "rb") as f:
                    cmdline = f.read()
                with open("/proc/%s/environ" % entry, "rb") as f:
                    environ = f.read()
            except OSError:
                continue
            if self.dir.encode() in cmdline or self.dir.encode() in environ:
                found.append(int(entry))
        return found

    def stop(self):
        """Cancels the jobs, stops the daemons, kills what is left of the cluster; returns the
        pids that had to be killed after the daemons were stopped."""
        if self.daemons and os.path.exists(self.conf):
            self.run(["scancel", "--full", "--user", "root"], check=False)
            deadline = time.time() + 15
            while time.time() < deadline:
                out = self.run(["squeue", "-h", "-o", "%i"], check=False)
                if out.returncode != 0 or out.stdout.strip() == "":
                    break
                time.sleep(0.2)
        for name, proc, log in reversed(self.daemons):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            log.close()
        strays = []
        for _ in range(50):
            left = self.our_processes()
            if not left:
                break
            for pid in left:
                if pid not in strays:
                    strays.append(pid)
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.1)
        return strays, self.our_processes()

    def show_logs(self):
        for name in sorted(os.listdir(self.path("log"))):
            with open(self.path("log", name), errors="replace") as f:
                text = f.read()
            print("---- %s (last 40 lines)\n%s" % (name, "\n".join(text.splitlines()[-40:])))


def main():
    synth, analyze, submit, work = sys.argv[1:5]
    if os.geteuid() != 0:
        skip("a Slurm cluster of its own needs root (munged, slurmd); run the tests as root")
    missing = [p for p in PROGRAMS if shutil.which(p) is None]
    if missing:
        skip("no %s on PATH (Debian: apt-get install slurm-wlm munge)" % ", ".join(missing))
    bin_dir = os.path.dirname(os.path.abspath(analyze))
    if not os.access(os.path.join(bin_dir, "ap_merge"), os.X_OK):
        raise AssertionError("ap_merge is not beside " + analyze)
    u.fresh_dir(work)
    ck = u.Checker()
    dump = os.path.join(work, "dump")
    u.run([synth, "--out", dump, "--num-layers", 2, "--num-q-heads", 4, "--num-k-heads", 2, "--dim", 8,
           "--tokens", 1024, "--examples", 4, "--buckets", 8, "--seed", 5], expect=0, quiet=True)
    options = ["--data-root", dump, "--normality-max-dims", 4, "--seed", 11]
    whole = os.path.join(work, "whole")
    u.run([analyze, "--output-dir", whole] + options, expect=0)
    reference = u.read_set(whole)

    out = os.path.join(work, "out")
    os.makedirs(os.path.join(out, "shard-1"))
    blocker = os.path.join(out, "shard-1", ".ap_results")
    with open(blocker, "w") as f:
        f.write("in the way of shard 1\n")

    timings = {}
    cluster = Cluster()
    env = dict(cluster.env, AP_BIN=bin_dir, AP_SBATCH_ARGS="--cpus-per-task=1 --mem=200M --time=10")
    passed = False
    try:
        start = time.time()
        cluster.start()
        timings["cluster start"] = time.time() - start

        def submit_jobs(extra):
            proc = subprocess.run(["bash", submit] + extra + ["3", out] + [str(a) for a in options], env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=60)
            print("$ submit.sh %s 3 %s ...  -> %d\n%s%s" % (" ".join(extra), out, proc.returncode, proc.stdout,
                                                             proc.stderr))
            if proc.returncode != 0:
                raise AssertionError("submit.sh failed")
            array = re.search(r"^array job (\d+):", proc.stdout, re.M).group(1)
            merge = re.search(r"^merge job (\d+): after job (\d+) ends", proc.stdout, re.M)
            ck.check(merge.group(2) == array, "the merge job waits for job %s, not the array %s" % (merge.group(2), array))
            return array, merge.group(1)

        # 1. Shard 1 cannot write its folder: the merge runs anyway and names it.
        start = time.time()
        array, merge = submit_jobs([])
        cluster.wait_for_jobs()
        timings["first submission (3 shards, merge)"] = time.time() - start
        tasks = cluster.job_states(array)
        print("array job %s: %s" % (array, tasks))
        ck.check(tasks.get(0) == ("COMPLETED", 0) and tasks.get(2) == ("COMPLETED", 0),
                 "tasks 0 and 2 should complete: %s" % tasks)
        ck.check(tasks.get(1) == ("FAILED", 2), "task 1 should fail with exit 2 (its folder is blocked): %s" % tasks)
        merge_state = cluster.job_states(merge)
        print("merge job %s: %s" % (merge, merge_state))
        ck.check(merge_state.get(None) == ("FAILED", 2), "the first merge should run and refuse (exit 2): %s"
                 % merge_state)
        merge_log = open(os.path.join(out, "logs", "merge-%s.log" % merge)).read()
        print("merge log:\n" + merge_log)
        ck.check("shard folder '%s': holds no complete result set" % os.path.join(out, "shard-1") in merge_log,
                 "the merge log does not name shard 1 as unfinished")
        ck.check(all(u.read_set(out)[name] is None for name in u.CSVS), "the refused merge wrote results")

        # 2. The rerun of shard 1 as examples/README.md says; the new merge completes.
        os.remove(blocker)
        start = time.time()
        array, merge = submit_jobs(["--only", "1"])
        cluster.wait_for_jobs()
        timings["rerun of shard 1 and merge"] = time.time() - start
        tasks = cluster.job_states(array)
        ck.check(tasks == {1: ("COMPLETED", 0)}, "the rerun should run task 1 only and complete: %s" % tasks)
        merge_state = cluster.job_states(merge)
        ck.check(merge_state.get(None) == ("COMPLETED", 0), "the second merge should complete: %s" % merge_state)
        print("merge log:\n" + open(os.path.join(out, "logs", "merge-%s.log" % merge)).read())
        merged = u.read_set(out)
        for name in u.CSVS:
            ck.check(merged[name] is not None and merged[name] == reference[name],
                     "%s of the Slurm run differs from the unsharded run's" % name)
            if name != "head_sequence_influence.csv":  # off by default (docs/method.md §3.7): its header only
                ck.check(reference[name].count(b"\n") > 1, "%s of the unsharded run has no rows" % name)
        passed = not ck.failures
    except Exception:
        cluster.show_logs()
        raise
    finally:
        start = time.time()
        strays, left = cluster.stop()
        timings["teardown"] = time.time() - start
        if not passed and os.path.isdir(cluster.dir):
            cluster.show_logs()
        shutil.rmtree(cluster.dir, ignore_errors=True)
        for what, seconds in timings.items():
            print("%-40s %.1f s" % (what, seconds))
    ck.check(not left, "processes of the cluster survive its teardown: %s" % left)
    if strays:
        print("note: killed after the daemons stopped: %s" % strays)
    ck.close("test_slurm")


if __name__ == "__main__":
    main()
