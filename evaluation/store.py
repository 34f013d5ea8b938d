"""Crash-safe run-directory files: append-only, fsync'd `samples.jsonl` whose reader drops a torn last line and
raises on a malformed line in the middle (first write of a key wins), JSON/text files replaced atomically, and the
lock that keeps a directory to one run at a time. See docs/evaluation.md#generation-and-durability.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from pathlib import Path


def sample_key(row: dict) -> tuple[str, str, int]:
    return (str(row["benchmark"]), str(row["id"]), int(row["sample"]))


def read_samples(path: Path, repair: bool = False) -> list[dict]:
    """Rows of a samples.jsonl in file order, first occurrence of each key only. A torn last line is dropped
    (and cut off the file when `repair`, so the next append starts on a line boundary)."""
    path = Path(path)
    if not path.exists():
        return []
    data = path.read_bytes()
    lines = data.split(b"\n")
    good_end = 0  # byte offset just after the last complete, valid line
    rows, seen, offset = [], set(), 0
    for i, line in enumerate(lines):
        is_last = i == len(lines) - 1
        end = offset + len(line) + (0 if is_last else 1)
        if line.strip():
            if is_last:  # no trailing newline: the write was cut short
                break
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                if i == len(lines) - 2 and not lines[-1]:
                    break  # torn line that happened to end in a newline byte: still the last one
                raise ValueError(f"{path}: line {i + 1} is corrupt (not the last line, so not a torn write)") from None
            key = sample_key(row)
            if key not in seen:
                seen.add(key)
                rows.append(row)
        good_end = end
        offset = end
    if repair and good_end < len(data):
        with open(path, "r+b") as fh:
            fh.truncate(good_end)
            fh.flush()
            os.fsync(fh.fileno())
    return rows


def append_samples(path: Path, rows: list[dict]) -> None:
    """Append complete JSON lines and fsync before returning (one write call per batch)."""
    if not rows:
        return
    payload = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode("utf-8")
    with open(path, "ab") as fh:
        fh.write(payload)
        fh.flush()
        os.fsync(fh.fileno())


def write_atomic(path: Path, text: str | bytes) -> None:
    """Write-temp-then-rename: readers see the old or the new file, never a partial one."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp.{os.getpid()}")
    with open(tmp, "wb") as fh:
        fh.write(text.encode("utf-8") if isinstance(text, str) else text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    try:
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError:
        pass  # some filesystems cannot fsync a directory; the rename itself is still atomic


def write_json(path: Path, obj) -> None:
    write_atomic(path, json.dumps(obj, indent=2, sort_keys=False, ensure_ascii=False) + "\n")


def check_config(run_dir: Path, config: dict) -> bool:
    """Compare `config` with the run directory's config.json without writing: False when there is none (a new run),
    or when there is one but no sample was written under it yet (a run that failed before generating anything
    holds nothing to mix, so it does not lock the directory); True when they are equal (resume); else ValueError
    listing the differing keys (never mix samples of two configurations)."""
    path = Path(run_dir) / "config.json"
    if not path.exists():
        return False
    stored = json.loads(path.read_text(encoding="utf-8"))
    new = json.loads(json.dumps(config))
    if stored == new:
        return True
    if not read_samples(Path(run_dir) / "samples.jsonl"):
        return False
    diff = sorted(k for k in set(stored) | set(new) if stored.get(k) != new.get(k))
    raise ValueError(
        f"{run_dir} holds a run with a different configuration (differs in: {', '.join(diff)}); "
        "use another --output, or the same flags to resume"
    )


def check_or_write_config(run_dir: Path, config: dict) -> bool:
    """`check_config`, then config.json written when it is a new run. Call it only once the run's inputs have
    passed their checks, so that a run refused for bad input leaves no config.json behind."""
    resumed = check_config(run_dir, config)
    if not resumed:
        write_json(Path(run_dir) / "config.json", config)
    return resumed


@contextlib.contextmanager
def run_lock(run_dir: Path):
    """Hold RUN_DIR/.lock for the run: a second run of the directory (the same command started twice, a requeued
    job whose first copy still runs) is refused rather than generating and appending every missing sample again.
    A POSIX lock, not flock: forked children (vLLM's engine) do not inherit it, so it is released the moment this
    process dies. On a filesystem without locks the run goes on unlocked."""
    with open(Path(run_dir) / ".lock", "a+b") as fh:
        try:
            fcntl.lockf(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except (BlockingIOError, PermissionError):  # EAGAIN / EACCES: another process holds it
            raise RuntimeError(
                f"{run_dir} is being written by another run; wait for it, or stop it and rerun to resume"
            ) from None
        except OSError:  # ENOLCK, EOPNOTSUPP...: no locks on this filesystem
            pass
        yield
