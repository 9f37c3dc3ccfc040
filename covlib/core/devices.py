"""The device work runs on by default: a CUDA GPU where torch sees one, else the CPU; the one place that asks torch.

torch is imported on the first call, not with the module: `covlib.core` loads without it.
"""

from __future__ import annotations


def cuda_available() -> bool:
    """Whether torch sees a CUDA GPU."""
    import torch

    return torch.cuda.is_available()


def default_device() -> str:
    """'cuda' when a GPU is visible, else 'cpu'."""
    return "cuda" if cuda_available() else "cpu"
