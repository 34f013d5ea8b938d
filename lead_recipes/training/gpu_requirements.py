"""What a GPU node needs for the pinned training stack, written once: the CUDA of the pinned torch wheel, the NVIDIA
driver that CUDA needs, and the nvcc that builds flash-attn and DeepSpeed's ops. Read by `launchers/bootstrap.sh`
(before any install, so standard library only) and by the doctor. Pinned versions themselves live in pyproject.toml.
See README.md#on-a-gpu-node.
"""

from __future__ import annotations

# torch==2.13.0 from the package index is built for CUDA 13.0 (it pulls cuda-toolkit 13 and nvidia-nccl-cu13).
TORCH_CUDA = "13.0"

# Oldest Linux driver branch that runs each CUDA major (NVIDIA's minor-version compatibility: any driver of the
# major's first branch runs every minor release of it). CUDA 13.0 GA shipped with 580.65.06.
MIN_DRIVER = {"12": "525.60.13", "13": "580.65.06"}


def min_driver(cuda: str) -> str:
    """The oldest driver that runs CUDA `cuda` ("13.0" -> "580.65.06"); KeyError names the majors known."""
    major = cuda.split(".")[0]
    if major not in MIN_DRIVER:
        raise KeyError(f"no driver requirement recorded for CUDA {cuda} (known majors: {sorted(MIN_DRIVER)})")
    return MIN_DRIVER[major]


def version_tuple(version: str) -> tuple[int, ...]:
    """'580.65.06' -> (580, 65, 6); non-numeric parts end the tuple."""
    out = []
    for part in version.strip().split("."):
        if not part.isdigit():
            break
        out.append(int(part))
    return tuple(out)
