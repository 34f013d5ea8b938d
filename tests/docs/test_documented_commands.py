"""Every command in a fenced block of README.md, CONTRIBUTING.md and docs/*.md runs as written, to the stop that what
this machine lacks (GPU, network, Slurm) decides, so that the docs and the behaviour cannot drift apart; a usage
line's `[optional]` flags must exist. What counts as a command, the working directory it runs in and each stop with
its reason: CONTRIBUTING.md#documented-commands."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from lead_recipes.cli import COMMANDS
from lead_recipes.help_format import option_strings

ROOT = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("LEAD_RECIPES_SHARED", ROOT.parent / "shared")) / "data"
DOCS = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.M | re.S)
ASSIGNMENT = re.compile(r"^[A-Z_][A-Z0-9_]*=")


@dataclass
class Documented:
    where: str  # file:line
    text: str  # the command as written (continuations joined)
    env: dict[str, str] = field(default_factory=dict)
    argv: list[str] = field(default_factory=list)  # from `lead-recipes` or `bash` on, optional parts dropped
    optional: list[str] = field(default_factory=list)  # the [optional] parts of a usage line

    @property
    def id(self) -> str:
        return f"{self.where} {' '.join(self.argv[:3])}"


def _logical_lines(block: str, first_line: int):
    """(line number, text) with `\\` continuations and indented `[`/`--` continuations of usage lines joined."""
    out: list[list] = []
    for i, raw in enumerate(block.splitlines()):
        stripped = raw.strip()
        continues = out and (out[-1][1].endswith("\\") or (raw[:1].isspace() and stripped.startswith(("[", "--"))))
        if continues:
            out[-1][1] = out[-1][1].rstrip("\\").rstrip() + " " + stripped
        else:
            out.append([first_line + i, stripped])
    return [(n, text) for n, text in out]


def _split_optional(text: str) -> tuple[str, list[str]]:
    """(the text without its [bracketed] parts, those parts); brackets may nest (`CHECK[,CHECK]`)."""
    kept, parts, depth, current = [], [], 0, []
    for ch in text:
        if ch == "[":
            depth += 1
            if depth == 1:
                current = []
                continue
        elif ch == "]" and depth:
            depth -= 1
            if depth == 0:
                parts.append("".join(current))
                continue
        (current if depth else kept).append(ch)
    return "".join(kept), parts


def documented_commands() -> list[Documented]:
    found, seen = [], set()
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        for block in FENCE.finditer(text):
            first = text[: block.start(1)].count("\n") + 1
            for line_no, line in _logical_lines(block.group(1), first):
                if line.startswith("#") or not ("lead-recipes" in line or "launchers/bootstrap.sh" in line):
                    continue
                runnable, optional = _split_optional(line)
                try:
                    tokens = shlex.split(runnable, comments=True)
                except ValueError:
                    continue
                env = {}
                while tokens and ASSIGNMENT.match(tokens[0]):
                    key, _, value = tokens.pop(0).partition("=")
                    env[key] = value
                is_ours = tokens[:1] == ["lead-recipes"] or tokens[:2] == ["bash", "launchers/bootstrap.sh"]
                if not is_ours or (tokens[0] == "lead-recipes" and tokens[1:2] and tokens[1].endswith(":")):
                    continue  # another program's command, or printed output
                key = (tuple(sorted(env.items())), tuple(tokens))
                if key in seen:
                    continue
                seen.add(key)
                where = f"{path.relative_to(ROOT)}:{line_no}"
                found.append(Documented(where, line, env, tokens, optional))
    return found


COMMANDS_FOUND = documented_commands()


def test_the_docs_hold_commands_of_every_subcommand():
    """The extraction finds what the docs show: a broken extractor must not pass by finding nothing."""
    used = {c.argv[1] for c in COMMANDS_FOUND if c.argv[0] == "lead-recipes"}
    assert used >= {"train", "launch", "data", "grade", "serve", "replay", "eval"}, used
    assert len(COMMANDS_FOUND) >= 20


# ---------------------------------------------------------------- the working directory the docs assume
def _replay_steps(rollouts: Path, path: Path, per_step: int = 10) -> None:
    groups = [json.loads(line) for line in rollouts.open()]
    steps = []
    for s in range(0, len(groups), per_step):
        steps.append(
            {
                "step": s // per_step + 1,
                "groups": [
                    {
                        "correct": [bool(x["score"]) for x in g["samples"]],
                        "lengths": [min(4000, max(1, x["n_chars"] // 4)) for x in g["samples"]],
                    }
                    for g in groups[s : s + per_step]
                ],
            }
        )
    path.write_text("".join(json.dumps(st) + "\n" for st in steps))


def _generations(benchmark: Path, path: Path) -> None:
    """Saved generations for every problem of one benchmark: sample 0 boxes the gold answer, sample 1 does not."""
    rows = []
    for p in (json.loads(line) for line in benchmark.open()):
        for s, answer in enumerate((p["answer"], "-1")):
            response = f"Working. So the answer is \\boxed{{{answer}}}."
            rows.append(
                {"benchmark": benchmark.stem, "id": p["id"], "sample": s, "response": response, "num_tokens": 12}
            )
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


SANDBOX_FILE = re.compile(r"^<!-- sandbox file: (\S+) -->\n```[^\n]*\n(.*?)^```", re.M | re.S)


def _doc_files(dest: Path) -> None:
    """The files a page shows as content (a fenced block after `<!-- sandbox file: NAME -->`), written as shown, so
    that its commands read what the reader would have written."""
    for path in DOCS:
        for name, body in SANDBOX_FILE.findall(path.read_text(encoding="utf-8")):
            (dest / name).write_text(body)


@pytest.fixture()
def sandbox(tmp_path) -> Path:
    assert SHARED.is_dir(), f"../shared/data not found at {SHARED} (set LEAD_RECIPES_SHARED)"
    (tmp_path / "data" / "sources").mkdir(parents=True)
    (tmp_path / "data" / "benchmarks").symlink_to(SHARED / "benchmarks")
    for source in (SHARED / "train").glob("*.jsonl"):
        (tmp_path / "data" / "sources" / source.name).symlink_to(source)
    (tmp_path / "PATH").symlink_to(tmp_path / "data" / "sources")
    rollouts = SHARED / "rollouts" / "qwen25math_cot_math100x8.jsonl"
    (tmp_path / "rollouts.jsonl").symlink_to(rollouts)
    _replay_steps(rollouts, tmp_path / "steps.jsonl")
    _generations(SHARED / "benchmarks" / "amc2023.jsonl", tmp_path / "generations.jsonl")
    (tmp_path / "responses.jsonl").symlink_to(SHARED / "grader" / "qwen25math_cot100.jsonl")
    _doc_files(tmp_path)
    return tmp_path


def _env(command: Documented) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LEAD_RECIPES_", "RAY_"))}
    env.update(PYTHONPATH=str(ROOT), CUDA_VISIBLE_DEVICES="", HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")
    env.update(command.env)
    return env


def _argv(command: Documented) -> list[str]:
    if command.argv[0] == "lead-recipes":  # the console script is lead_recipes.cli:main
        return [sys.executable, "-m", "lead_recipes.cli", *command.argv[1:]]
    return ["bash", str(ROOT / command.argv[1]), *command.argv[2:]]  # bash launchers/bootstrap.sh ...


# ---------------------------------------------------------------- where each command must stop
def _flag(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv[:-1] else None


def _stop(command: Documented) -> tuple[str, list[str]]:
    """(what the command needs that is missing here, the argv to run)."""
    argv = list(command.argv)
    sub = argv[1] if argv[0] == "lead-recipes" else argv[2] if len(argv) > 2 else ""
    if argv[0] == "bash":
        return ("ci" if sub == "test" else "gpu" if sub == "train" else "bootstrap"), argv
    target = _flag(argv, "--launch.target")
    if "--run.dry_run_enable" in argv:
        return "nothing", argv
    if sub == "train" or (sub == "launch" and target == "local"):
        return "gpu", argv
    if sub == "doctor":
        return "doctor", argv
    if sub == "launch" and target in ("slurm", "ray"):
        return "nothing", argv + ["--run.dry_run_enable"]
    if sub == "serve":
        return "server", argv
    output = _flag(argv, "--output")
    if any(t.startswith("runs/") and t != output for t in argv):
        return "gpu-run", argv
    return "nothing", argv


def _run(argv: list[str], cwd: Path, env: dict[str, str], timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def _venv_is_current() -> bool:
    """bootstrap.sh rebuilds .venv when its stamp differs; a test must never do that. Its own stamp function."""
    script = (ROOT / "launchers" / "bootstrap.sh").read_text()
    functions = re.search(r"^detect_stack\(\).*?^}\n.*?^BOOTSTRAP_VERSION=\S+\n^stamp\(\).*?^}\n", script, re.M | re.S)
    stamp = ROOT / ".venv" / ".bootstrap-stamp"
    if not functions or not stamp.is_file():
        return False
    got = subprocess.run(
        ["bash", "-c", f"ROOT={shlex.quote(str(ROOT))}\n{functions.group(0)}\nstamp"], capture_output=True, text=True
    )
    return got.returncode == 0 and got.stdout == stamp.read_text()


def _port_free(host: str, port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind((host, port))
            return True
        except OSError:
            return False


# A warning of a library the command imports (`.../torch/cuda/__init__.py:64: FutureWarning: The pynvml package is
# deprecated`, DeepSpeed's `[WARNING] [real_accelerator.py...]`): nothing the user can act on, printed on every call.
_NOISE = re.compile(r"^\S+\.py:\d+: \w*Warning: |\[WARNING\]", re.M)


def third_party_noise(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if _NOISE.search(line) and not line.startswith("lead-recipes")]


def _check_stop(command: Documented, sandbox: Path) -> None:
    stop, argv = _stop(command)
    env = _env(command)
    if stop == "ci":  # running the suite inside itself would recurse; CI runs exactly this command
        assert "bash launchers/bootstrap.sh test" in (ROOT / ".ci" / "run").read_text()
        return
    if command.argv[0] == "bash" and not _venv_is_current():
        pytest.skip("the venv's bootstrap stamp differs from this checkout: running bootstrap.sh would rebuild it")
    if stop == "server":
        host, port = _flag(argv, "--serve.host") or "127.0.0.1", int(_flag(argv, "--serve.port") or 5000)
        if not _port_free(host, port):
            pytest.skip(f"port {port} is in use on this machine; the documented command names it")
        proc = subprocess.Popen(_argv(command), cwd=sandbox, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            line = proc.stdout.readline().decode()
            assert line.startswith("lead-recipes serve: ready"), (line, proc.stderr.read1().decode())
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=60) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        return
    done = _run(_argv(Documented(command.where, command.text, command.env, argv)), sandbox, env)
    said = f"{command.where}: `{command.text}` -> exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    assert "Traceback" not in done.stderr, said
    assert third_party_noise(done.stderr) == [], said
    if stop == "gpu":
        assert done.returncode == 1 and "cannot start training, missing: gpu: no CUDA GPU visible" in done.stderr, said
    elif stop == "doctor":  # its checks name the missing GPU; a subprocess check must not crash it
        assert done.returncode == 1 and done.stdout.startswith("[FAIL] gpu        no GPU"), said
    elif stop == "gpu-run":
        inputs = [t for t in argv if t.startswith("runs/") and t != _flag(argv, "--output")]
        last = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else ""
        assert done.returncode != 0 and any(p in last for p in inputs), said
    else:
        assert done.returncode == 0, said
        output = _flag(argv, "--output")
        assert output is None or (sandbox / output).exists(), said


def _marks(command: Documented):
    stop = _stop(command)[0]
    return [pytest.mark.slow] if stop in ("gpu", "doctor") else []  # the preflight starts Ray, the doctor vLLM


@pytest.mark.parametrize("command", [pytest.param(c, id=c.id, marks=_marks(c)) for c in COMMANDS_FOUND])
@pytest.mark.timeout(900)
def test_the_documented_command_runs_as_written_to_its_stop(command, sandbox):
    _check_stop(command, sandbox)


# ---------------------------------------------------------------- the [optional] parts of usage lines
def _parsers_of(argv: list[str]) -> list[argparse.ArgumentParser]:
    """The real parsers of `lead-recipes SUB [SUBSUB]`, caught as its --help formats them."""
    seen = []
    original = argparse.ArgumentParser.format_help

    def record(self):
        seen.append(self)
        return original(self)

    sub = argv[1]
    rest = [argv[2]] if sub in ("data", "eval") and argv[2:3] in (["build"], ["curriculum"], ["compare"]) else []
    argparse.ArgumentParser.format_help = record
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
            importlib.import_module(COMMANDS[sub][0]).main([*rest, "--help"])
    finally:
        argparse.ArgumentParser.format_help = original
    return seen


USAGE_LINES = [c for c in COMMANDS_FOUND if c.optional and c.argv[0] == "lead-recipes"]


@pytest.mark.parametrize("command", USAGE_LINES, ids=[c.id for c in USAGE_LINES])
def test_each_optional_flag_of_a_usage_line_exists_with_the_choices_it_lists(command):
    parsers = _parsers_of(command.argv)
    flags = set().union(*(option_strings(p) for p in parsers))
    actions = {s: a for p in parsers for a in p._actions for s in a.option_strings}
    wrong = []
    for part in command.optional:
        for match in re.finditer(r"(--[\w.\-]+)(?:[ =]([\w\-.]+(?:\|[\w\-.]+)+))?", part):
            flag, listed = match.groups()
            if flag.endswith(".") or "*" in part[match.end(1) : match.end(1) + 1]:
                continue  # a family such as --recipe.*
            if flag not in flags:
                wrong.append(f"{flag}: no such flag")
            elif listed and actions[flag].choices is not None and set(listed.split("|")) != set(actions[flag].choices):
                wrong.append(f"{flag}: lists {listed}, the choices are {sorted(actions[flag].choices)}")
    assert wrong == [], f"{command.where}: {command.text}"
