"""Data-parallel vLLM: several offline engines, each in its own process on its own GPUs, fed continuously, their
finished samples handed to the run's one sink. Per-request seeds make the samples those of one engine, and the
engine identity is one engine's, so a run resumes with another data-parallel size. It does not grade.
See docs/evaluation.md#using-the-whole-node-data-parallel-vllm-engines.
"""

from __future__ import annotations

import atexit
import collections
import multiprocessing as mp
import os
import queue
import subprocess
import traceback

from evaluation.backends import GenRequest, Sink, VLLMBackend
from evaluation.reaper import guard

# engine settings that change the batching, not a sample's text: a run may be resumed with other values
_NOT_IDENTITY = ("max_num_seqs", "window")


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
        raise ValueError(
            f"--vllm.data_parallel_size {flag} × tensor_parallel_size {tensor_parallel_size} needs "
            f"{flag * tensor_parallel_size} GPUs; {len(gpus)} are visible"
        )
    return flag


class _Shutdown(Exception):
    """close() asked the engine process to stop: what its engine holds is aborted."""


def _engine_main(rank: int, model: str, engine: dict, env: dict, inbox, outbox) -> None:
    """One engine process: load, then run jobs. A job is ("job", gen), then ("reqs", [...]) batches as the parent
    feeds them, then ("end",); every step's finished rows go back at once as (rank, "rows", rows), and the job
    ends with (rank, "done", None) or (rank, "error", traceback) after the requests in the engine have finished.
    None (close()) shuts the process down, aborting what its engine holds."""
    os.environ.update(env)
    try:
        backend = VLLMBackend(model, **engine)
        outbox.put((rank, "ready", backend.window))
        while (item := inbox.get()) is not None:
            gen, local, state = item[1], collections.deque(), {"ended": False}

            def take(k: int, block: bool, local=local, state=state):
                while not state["ended"]:
                    try:
                        msg = inbox.get(block=block and not local)
                    except queue.Empty:
                        break
                    if msg is None:
                        raise _Shutdown
                    if msg[0] == "end":
                        state["ended"] = True
                    else:
                        local.extend(msg[1])
                    block = False
                if local:
                    return [local.popleft() for _ in range(min(k, len(local)))]
                return None if state["ended"] else []

            try:
                backend.run_loop(take, gen, lambda rows: outbox.put((rank, "rows", rows)))
            except _Shutdown:
                return
            except Exception:  # noqa: BLE001 - reported to the parent, which raises it
                outbox.put((rank, "error", traceback.format_exc()))
                while not state["ended"]:  # the job's remaining messages are not for the next job
                    msg = inbox.get()
                    if msg is None:
                        return
                    state["ended"] = msg[0] == "end"
            else:
                outbox.put((rank, "done", None))
    except BaseException:  # noqa: BLE001 - reported to the parent, which raises it
        outbox.put((rank, "error", traceback.format_exc()))


class DataParallelVLLM:
    """`size` VLLMBackend engines in child processes; same interface as VLLMBackend (prompt_mode "text", the
    tokenizer loaded in this process for chat templates). Each engine is fed requests as it finishes others, so
    it holds up to 2 × its in-flight window (the window in vLLM, as many queued in its process) or its share of
    the unfinished work when that is less, and a fast engine takes more of the work than a slow one."""

    name = "vllm"
    prompt_mode = "text"

    def __init__(
        self, model: str, size: int, *, gpus: list[str] | None = None, start_timeout_s: float = 1800.0, **engine
    ):
        if int(size) < 1:
            raise ValueError(f"--vllm.data_parallel_size must be >= 1, got {size}")
        self.model, self.size, self.engine = model, int(size), engine
        self.gpus = visible_gpus() if gpus is None else gpus
        self.start_timeout_s = start_timeout_s
        self.requests_per_engine = [0] * self.size
        self._procs, self._inboxes, self._outbox, self._tokenizer, self._windows = [], [], None, None, []

    @property
    def tokenizer(self):
        if self._tokenizer is None:
            from evaluation.backends import load_tokenizer

            self._tokenizer = load_tokenizer(self.model)
        return self._tokenizer

    def info(self) -> dict:
        engine_args = {
            "model": self.model,
            "dtype": "auto",
            "tensor_parallel_size": 1,
            "max_model_len": None,
            "enforce_eager": False,
            "seed": 0,
            "gpu_memory_utilization": None,
        }
        engine_args.update({k: v for k, v in self.engine.items() if k not in _NOT_IDENTITY})
        return {"backend": self.name, "model": self.model, "engine_args": engine_args}

    def _env(self, rank: int) -> dict:
        tp = int(self.engine.get("tensor_parallel_size", 1))
        return {"CUDA_VISIBLE_DEVICES": ",".join(self.gpus[rank * tp : (rank + 1) * tp])} if self.gpus else {}

    def _get(self, timeout: float):
        """The next engine message, or None after `timeout` seconds without one."""
        try:
            return self._outbox.get(timeout=timeout)
        except queue.Empty:
            return None

    def _dead(self) -> dict[int, int]:
        """{rank: exit code} of the engine processes that have exited (only close() ends a live one)."""
        return {r: p.exitcode for r, p in enumerate(self._procs) if p.exitcode is not None}

    def start(self) -> None:
        if self._procs:
            return
        ctx = mp.get_context("spawn")  # CUDA and vLLM cannot be forked into
        guard()  # the engines die with this process, however it ends (each engine's own vLLM processes with it)
        atexit.register(self.close)  # non-daemon children would otherwise hold the exit forever
        self._outbox = ctx.Queue()
        for rank in range(self.size):
            inbox = ctx.Queue()
            # not a daemon: vLLM starts its own engine-core process, which a daemonic process may not do
            proc = ctx.Process(
                target=_engine_main,
                name=f"lead-recipes-vllm-dp{rank}",
                args=(rank, self.model, self.engine, self._env(rank), inbox, self._outbox),
            )
            proc.start()
            self._procs.append(proc)
            self._inboxes.append(inbox)
        self._windows = [0] * self.size
        ready, waited = 0, 0.0
        while ready < self.size:
            msg = self._get(5.0)
            if msg is None:
                waited += 5.0
                dead = self._dead()
                if dead or waited >= self.start_timeout_s:
                    self.close()
                    why = f"exited with code {next(iter(dead.values()))}" if dead else "did not start in time"
                    raise RuntimeError(f"vLLM engine {next(iter(dead), 0)} {why}")
                continue
            rank, kind, payload = msg
            if kind == "error":
                self.close()
                raise RuntimeError(f"vLLM engine {rank} failed to start:\n{payload}")
            self._windows[rank] = int(payload)
            ready += 1

    def generate(self, requests: list[GenRequest], gen, sink: Sink) -> None:
        """Feed `requests` to the engines as they finish others; hand each engine step's finished rows to `sink`
        as they arrive (finish order). When an engine fails or its process dies, the intake stops, the other
        engines finish what they hold (it reaches the sink), then the error is raised. Any other exception (the
        sink's, an interrupt) closes the engines, aborting what they hold."""
        if not requests:
            return
        self.start()
        # Dealt like cards (every size-th request in turn), so that each engine's share mixes the benchmarks: an
        # AIME response runs several times a MATH-500 one, and a contiguous block of AIME would hold up the run.
        requests = [requests[i] for r in range(self.size) for i in range(r, len(requests), self.size)]
        pos, outstanding, ended, errors, finished = 0, [0] * self.size, False, [], set()

        def feed(rank: int) -> None:
            # Up to 2 × its window, but never more than its share of the unfinished work: vLLM's default window on
            # a large GPU (2 × 1024) would otherwise hand a whole preset to the first engine and leave the rest idle.
            nonlocal pos
            share = -(-(len(requests) - pos + sum(outstanding)) // self.size)
            k = min(min(2 * self._windows[rank], share) - outstanding[rank], len(requests) - pos)
            if k > 0 and not ended:
                self._inboxes[rank].put(("reqs", requests[pos : pos + k]))
                pos += k
                outstanding[rank] += k
                self.requests_per_engine[rank] += k

        def end_all() -> None:
            nonlocal ended
            if not ended:
                ended = True
                for inbox in self._inboxes:
                    inbox.put(("end",))

        def handle(msg) -> None:
            rank, kind, payload = msg
            if kind == "rows":
                outstanding[rank] -= len(payload)
                sink(payload)
                feed(rank)
                if pos == len(requests):
                    end_all()
            elif rank not in finished:
                finished.add(rank)
                if kind == "error":
                    errors.append(f"vLLM engine {rank} failed:\n{payload}")
                    end_all()

        try:
            for rank in range(self.size):
                self._inboxes[rank].put(("job", gen))
                feed(rank)
            if pos == len(requests):
                end_all()
            while len(finished) < self.size:
                msg = self._get(5.0)
                if msg is not None:
                    handle(msg)
                for rank, code in self._dead().items():  # checked at every message: a death stops the intake now
                    if rank not in finished:
                        finished.add(rank)
                        errors.append(
                            f"vLLM engine {rank} exited with code {code}; its {outstanding[rank]} unfinished samples "
                            "are generated again on resume"
                        )
                        end_all()
            while self._dead() and (msg := self._get(0.5)) is not None:  # rows an engine sent before it died
                handle(msg)
        except BaseException:
            self.close()
            raise
        if errors:
            raise RuntimeError(errors[0])

    def close(self) -> None:
        for inbox in self._inboxes:
            inbox.put(None)
        for proc in self._procs:
            proc.join(timeout=60)
            if proc.exitcode is None:
                proc.terminate()
                proc.join(timeout=10)
        self._procs, self._inboxes = [], []
