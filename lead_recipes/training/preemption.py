"""Checkpoint on request (preemption, time limits): the request and "saved" marker files, the driver's signal
handler `SaveOnSignal` (SIGUSR1, first SIGTERM) and `SaveOnRequestMixin`, the trainers' base that saves at the next
step boundary through OpenRLHF's own save path, writes the marker and stops the sync trainer (`SavedOnRequest`).
It does not import OpenRLHF, requeue or resume (slurm/train.sbatch, `--ckpt.load_enable`).
See docs/training.md#preemption-and-time-limits-checkpoint-on-signal-requeue-resume.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import sys
import time

SAVE_REQUEST_ENV = "LEAD_RECIPES_SAVE_REQUEST"
REQUEST_FILE, SAVED_FILE = "recipe_save_request.json", "recipe_saved.json"
PREEMPTED_EXIT = 75  # EX_TEMPFAIL: stopped after a requested checkpoint; rerun with --ckpt.load_enable
PROG = "lead-recipes train"

# lead_recipes.training.openrlhf_plugin attaches OpenRLHF's log handler to this logger (init_logger), as to its own
logger = logging.getLogger(__name__)


def save_request_path(ckpt_path: str) -> str:
    """Where a checkpoint request is written: $LEAD_RECIPES_SAVE_REQUEST, else <ckpt.path>/recipe_save_request.json.
    Absolute, since the trainer actor may run elsewhere (same path on the shared filesystem)."""
    return os.path.abspath(os.environ.get(SAVE_REQUEST_ENV) or os.path.join(ckpt_path, REQUEST_FILE))


def saved_marker_path(request_path: str) -> str:
    """The trainer's "saved" marker ({"step", "tag", ...}), beside the request."""
    return os.path.join(os.path.dirname(request_path), SAVED_FILE)


def write_json_atomic(path: str, obj: dict) -> None:
    """Write-then-rename, so a reader on another node never sees half a file."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(json.dumps(obj) + "\n")
    os.replace(tmp, path)


def request_save(path: str, why: str) -> None:
    write_json_atomic(
        path,
        {
            "signal": why,
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        },
    )


def read_save_request(path: str | None) -> dict | None:
    """The pending request at `path` (None if there is none); an unreadable file still counts as a request."""
    if not path or not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            request = json.load(f)
    except (OSError, ValueError) as exc:  # still a request: someone wants a checkpoint now
        request = {"signal": "unknown", "error": str(exc)}
    return request if isinstance(request, dict) else {"signal": "unknown"}


class SaveOnSignal:
    """SIGUSR1 and a first SIGTERM request a checkpoint; a second SIGTERM ends the process as SIGTERM would."""

    def __init__(self, path: str):
        self.path, self.terms = path, 0

    def __call__(self, signum, _frame):
        name = signal.Signals(signum).name
        if signum == signal.SIGTERM:
            self.terms += 1
            if self.terms > 1:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                os.kill(os.getpid(), signal.SIGTERM)
                return
        request_save(self.path, name)
        print(
            f"{PROG}: {name}: checkpoint requested ({self.path}); training stops after the next step's save",
            file=sys.stderr,
            flush=True,
        )

    @contextlib.contextmanager
    def installed(self):
        """Remove a previous run's request/marker (they must not stop this run), then handle SIGUSR1/SIGTERM until
        the block ends (the previous handlers are restored)."""
        for path in (self.path, saved_marker_path(self.path)):
            if os.path.exists(path):
                os.remove(path)
        old = {s: signal.signal(s, self) for s in (signal.SIGUSR1, signal.SIGTERM)}
        print(
            f"{PROG}: SIGUSR1/SIGTERM request a checkpoint at the next step boundary ({self.path})",
            file=sys.stderr,
            flush=True,
        )
        try:
            yield self
        finally:
            for signum, handler in old.items():
                signal.signal(signum, handler)


class SavedOnRequest(Exception):
    """Raised out of the trainer's fit() once a requested checkpoint is saved: the job is about to be stopped, so
    training ends there, before OpenRLHF's final model save; `lead-recipes train` exits with PREEMPTED_EXIT."""

    def __init__(self, step: int = 0, tag: str = ""):
        super().__init__(f"checkpoint {tag} saved at global_step {step} on request; training stopped")
        self.step, self.tag = step, tag

    def __reduce__(self):  # crosses the Ray boundary inside the actor's task error
        return (SavedOnRequest, (self.step, self.tag))


def saved_on_request(exc: BaseException) -> SavedOnRequest | None:
    """The SavedOnRequest behind `exc`: itself, or the cause of the RayTaskError (a subclass of it) from ray.get."""
    saved = exc if isinstance(exc, SavedOnRequest) else getattr(exc, "cause", None)
    return saved if isinstance(saved, SavedOnRequest) else None


class SaveOnRequestMixin:
    """Save-on-request for a BasePPOTrainer subclass (place it before the OpenRLHF class in the bases). The request
    path travels in `args.recipe_save_request` (set by the plug-in on the driver: actors lack the job's environment)."""

    # After a requested save: stop (sync) or keep training (async: PPOTrainerAsync.fit waits on the generator
    # actor too, which would block forever on its slot queue if the trainer stopped; the job script ends it).
    stop_on_save_request = True

    def save_logs_and_checkpoints(self, global_step, logs_dict=None, client_states=None):
        path = getattr(self.args, "recipe_save_request", None)
        request = read_save_request(path)
        if request is None:
            return super().save_logs_and_checkpoints(global_step, logs_dict, client_states)
        # Called by fit() after every train step with the full client_states (episode, step, dataloader): the
        # step boundary. OpenRLHF saves when global_step % save_steps == 0, so save_steps = 1 makes it save now
        # through its own path (actor save_checkpoint, critic too); restored right after.
        ckpt, every = self.args.ckpt, self.args.ckpt.save_steps
        ckpt.save_steps = 1
        try:
            super().save_logs_and_checkpoints(global_step, logs_dict, client_states)
        finally:
            ckpt.save_steps = every
        tag = f"global_step{global_step}"
        write_json_atomic(
            saved_marker_path(path),
            {
                "step": int(global_step),
                "tag": tag,
                "ckpt_path": os.path.abspath(ckpt.path),
                "request": request,
                "stopped": self.stop_on_save_request,
            },
        )
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)
        logger.warning(
            f"lead-recipes: checkpoint {tag} saved on request ({request.get('signal')}); marker "
            f"{saved_marker_path(path)}" + ("; stopping training" if self.stop_on_save_request else "")
        )
        if self.stop_on_save_request:
            raise SavedOnRequest(int(global_step), tag)

    def fit(self, *args, **kwargs):
        try:
            return super().fit(*args, **kwargs)
        except BaseException:  # upstream closes its trackers only on a normal end: flush the last logs of a
            for tracker in (self.wandb_logger, self.tensorboard_logger):  # requested stop, GradingFailure, ...
                if tracker is not None:
                    try:
                        tracker.close()
                    except Exception as exc:  # noqa: BLE001  (the training error is the one to report)
                        logger.warning(f"lead-recipes: closing {type(tracker).__name__} failed: {exc!r}")
            raise
