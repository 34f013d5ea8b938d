"""A real single-node Slurm for tests (Debian slurm-wlm; CONTRIBUTING.md says how to install it): munge + slurmctld +
slurmd with a temporary SLURM_CONF and state directory, tasks bound to their cores (task/affinity, memory not
enforced) and `gpus` fake GPUs per node (gres/gpu). Everything started here is stopped by PID in `stop()`. It does
not install Slurm (launchers/bootstrap.sh does); `missing()` says what is absent so tests can skip. What such a
cluster cannot show: docs/slurm.md#what-the-tests-cannot-show-on-one-machine."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import time
from pathlib import Path

from support.ports import free_port

BINARIES = ("slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "munged", "munge")
SBIN = ("/usr/sbin", "/usr/bin", "/sbin", "/bin")


def which(name: str) -> str | None:
    return shutil.which(name) or next((f"{d}/{name}" for d in SBIN if os.access(f"{d}/{name}", os.X_OK)), None)


def missing() -> str | None:
    """None if a single-node Slurm can be started here, else the reason it cannot."""
    absent = [b for b in BINARIES if which(b) is None]
    if absent:
        return f"Slurm binaries not installed: {', '.join(absent)} (launchers/bootstrap.sh test installs them)"
    if os.geteuid() != 0:
        return "starting slurmd/munged needs root"
    if not Path("/etc/munge/munge.key").exists():
        return "/etc/munge/munge.key missing (the munge package's postinst creates it)"
    return None


class SlurmCluster:
    """Start with `start()`; `env` is the environment for sbatch/squeue/scontrol (SLURM_CONF set).
    nodes=1: one node "localhost" (the cpu-stack.md recipe). nodes>1: nodes n1..nN, each its own slurmd on
    127.0.0.1 with its own port, spool and pid file — several Slurm nodes on one machine, so multi-node job
    scripts (a Ray head plus workers) run for real; `cpus` is then per node."""

    def __init__(self, root: Path, cpus: int | None = None, nodes: int = 1, gpus: int = 0):
        self.root = Path(root).resolve()
        self.nodes = nodes
        self.names = ["localhost"] if nodes == 1 else [f"n{i + 1}" for i in range(nodes)]
        self.cpus = cpus or (max(1, os.cpu_count() or 1) if nodes == 1 else 1)
        self.gpus = gpus
        self.conf = self.root / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        self._munged_started = False
        self._pids: list[int] = []

    def _write_conf(self) -> None:
        s = self.root
        for d in ("state", "spool"):
            (s / d).mkdir(parents=True, exist_ok=True)
        per_node = "" if self.nodes == 1 else "-%n"
        lines = [
            "ClusterName=leadtest",
            "SlurmctldHost=localhost",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            "SlurmUser=root",
            "SlurmdUser=root",
            f"SlurmctldPort={free_port()}",
            f"SlurmdPort={free_port()}",
            f"StateSaveLocation={s}/state",
            f"SlurmdSpoolDir={s}/spool{per_node}",
            f"SlurmctldPidFile={s}/slurmctld.pid",
            f"SlurmdPidFile={s}/slurmd{per_node}.pid",
            f"SlurmctldLogFile={s}/slurmctld.log",
            f"SlurmdLogFile={s}/slurmd{per_node}.log",
            # Each task is bound to the cores Slurm gave its job, as on a real cluster. The cgroup plugins fail
            # silently on this kind of machine, so memory is not enforced.
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/affinity",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none",
            "SchedulerType=sched/backfill",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "MpiDefault=none",
            "ReturnToService=2",
            "SlurmctldTimeout=30",
            "SlurmdTimeout=30",
            "MinJobAge=600",
            "KillWait=10",
        ]
        gres = ""
        if self.gpus:
            devices = [s / f"fake-gpu{i}" for i in range(self.gpus)]
            # Character devices like /dev/null (slurmd rejects regular files): Slurm sets CUDA_VISIBLE_DEVICES as
            # for real GPUs; nothing can run on them.
            for dev in devices:
                if not dev.exists():
                    os.mknod(dev, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
            lines.append("GresTypes=gpu")
            (s / "gres.conf").write_text("".join(f"Name=gpu Type=fake File={d}\n" for d in devices))
            gres = f" Gres=gpu:fake:{self.gpus}"
        if self.nodes == 1:
            lines.append(f"NodeName=localhost NodeAddr=127.0.0.1 CPUs={self.cpus} RealMemory=4000{gres} State=UNKNOWN")
        else:
            lines += [
                f"NodeName={n} NodeHostname=localhost NodeAddr=127.0.0.1 Port={free_port()} CPUs={self.cpus} "
                f"RealMemory=4000{gres} State=UNKNOWN"
                for n in self.names
            ]
        # Preemption with a grace time: an `urgent` job takes the nodes of `debug` jobs; Slurm sends SIGTERM to the
        # preempted job's steps at once and requeues it after GraceTime (sched_interval: preempt within seconds).
        nodes = ",".join(self.names)
        lines += [
            "PreemptType=preempt/partition_prio",
            "PreemptMode=REQUEUE",
            "SchedulerParameters=sched_interval=5",
            f"PartitionName=debug Nodes={nodes} Default=YES MaxTime=INFINITE State=UP PriorityTier=1 GraceTime=45",
            f"PartitionName=urgent Nodes={nodes} MaxTime=INFINITE State=UP PriorityTier=2 PreemptMode=OFF",
            "",
        ]
        self.conf.write_text("\n".join(lines))

    def _munge_ok(self) -> bool:
        munge = subprocess.run([which("munge"), "-n"], capture_output=True)
        if munge.returncode != 0:
            return False
        return subprocess.run([which("unmunge")], input=munge.stdout, capture_output=True).returncode == 0

    def start(self, timeout: float = 30.0) -> "SlurmCluster":
        self._write_conf()
        if not self._munge_ok():
            Path("/run/munge").mkdir(parents=True, exist_ok=True)
            shutil.chown("/run/munge", "munge", "munge")
            subprocess.run(["runuser", "-u", "munge", "--", which("munged")], check=True)
            self._munged_started = True
            self._wait(self._munge_ok, timeout, "munged")
        subprocess.run([which("slurmctld")], env=self.env, check=True)
        self._pids.append(self._pid("slurmctld"))
        for name in self.names:
            subprocess.run([which("slurmd"), "-N", name], env=self.env, check=True)
            self._pids.append(self._pid("slurmd" if self.nodes == 1 else f"slurmd-{name}"))
        self._wait(self._node_idle, timeout, "the Slurm node to become idle")
        return self

    def _pid(self, daemon: str, timeout: float = 10.0) -> int:
        path = self.root / f"{daemon}.pid"
        self._wait(lambda: path.exists() and path.read_text().strip().isdigit(), timeout, f"{daemon} pid file")
        return int(path.read_text().strip())

    def _node_idle(self) -> bool:
        out = subprocess.run([which("sinfo"), "-h", "-N", "-o", "%N %t"], env=self.env, capture_output=True, text=True)
        states = dict(line.split() for line in out.stdout.splitlines() if line.strip())
        for name, state in states.items():
            if state.startswith("drain"):  # saved state can keep a drain across restarts
                self.scontrol("update", f"nodename={name}", "state=resume")
        return len(states) == self.nodes and all(st in ("idle", "mix", "alloc") for st in states.values())

    def wait_idle(self, timeout: float = 60.0) -> None:
        """Until every node is idle (a requeued job's previous run has fully left its nodes)."""

        def idle() -> bool:
            out = subprocess.run(
                [which("sinfo"), "-h", "-N", "-o", "%N %t"], env=self.env, capture_output=True, text=True
            ).stdout.splitlines()  # a node is listed once per partition
            states = dict(line.split() for line in out if line.strip())
            return len(states) == self.nodes and all(state == "idle" for state in states.values())

        self._wait(idle, timeout, "all nodes idle")

    @staticmethod
    def _wait(pred, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not pred():
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out waiting for {what}")
            time.sleep(0.2)

    def scontrol(self, *args: str) -> str:
        return subprocess.run(
            [which("scontrol"), *args], env=self.env, capture_output=True, text=True, check=True
        ).stdout

    def sbatch(self, *args: str, cwd: Path | None = None) -> str:
        out = subprocess.run(
            [which("sbatch"), "--parsable", *args], env=self.env, capture_output=True, text=True, cwd=cwd
        )
        if out.returncode != 0:
            raise RuntimeError(f"sbatch failed: {out.stderr}")
        return out.stdout.strip().split(";")[0]

    def job(self, job_id: str) -> dict[str, str]:
        """`scontrol show job` as a dict (JobState, RestartCnt, ExitCode, ...)."""
        out = subprocess.run(
            [which("scontrol"), "-o", "show", "job", job_id], env=self.env, capture_output=True, text=True
        ).stdout
        fields = {}
        for token in out.split():
            key, _, value = token.partition("=")
            fields.setdefault(key, value)
        return fields

    def wait_state(self, job_id: str, states: tuple[str, ...], timeout: float, restarts: int = 0) -> dict[str, str]:
        deadline = time.monotonic() + timeout
        while True:
            info = self.job(job_id)
            if info.get("JobState") in states and int(info.get("Restarts", "0") or 0) >= restarts:
                return info
            if time.monotonic() > deadline:
                raise TimeoutError(f"job {job_id} not in {states} (restarts >= {restarts}) after {timeout}s: {info}")
            time.sleep(0.5)

    def log_tail(self, lines: int = 40) -> str:
        """The end of the controller's and the nodes' logs (for failure messages)."""
        out = []
        for log in sorted(self.root.glob("slurm*.log")):
            out.append(f"== {log.name}\n" + "\n".join(log.read_text(errors="replace").splitlines()[-lines:]))
        return "\n".join(out)

    def stop(self) -> None:
        # A job still running (a failed test) would outlive the daemons: its slurmstepd and step processes keep
        # their ports (the reward port of job 1 is the same in the next session). Cancel everything first, then kill
        # whatever of this cluster's jobs is left.
        subprocess.run([which("scancel"), "--full", "--user=root"], env=self.env, capture_output=True)
        try:
            self._wait(
                lambda: (
                    not subprocess.run(
                        [which("squeue"), "-h", "-t", "running,completing"],
                        env=self.env,
                        capture_output=True,
                        text=True,
                    ).stdout.strip()
                ),
                30,
                "",
            )
        except TimeoutError:
            pass
        for pid in reversed(self._pids):
            _kill(pid)
        mine = f"SLURM_CONF={self.conf}".encode()
        for proc in Path("/proc").glob("[0-9]*"):
            try:
                if int(proc.name) != os.getpid() and mine in (proc / "environ").read_bytes().split(b"\0"):
                    os.kill(int(proc.name), 9)
            except (OSError, ValueError):
                continue
        if self._munged_started:
            pidfile = Path("/run/munge/munged.pid")
            if pidfile.exists():
                _kill(int(pidfile.read_text().strip()))


def _kill(pid: int, timeout: float = 10.0) -> None:
    try:
        os.kill(pid, 15)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    try:
        os.kill(pid, 9)
    except ProcessLookupError:
        pass
