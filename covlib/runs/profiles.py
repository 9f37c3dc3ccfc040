"""Run profiles: the paper's settings, a CPU-sized subsample, or a smoke test.

| profile | when                          | what                                              |
|---------|-------------------------------|---------------------------------------------------|
| full    | default on a GPU              | the paper's settings (every notebook's defaults)  |
| cpu     | default without a GPU         | subsamples sized so all notebooks finish in ~1 h  |
| smoke   | CI (`make test`)              | a dozen examples, short generations               |

`auto` (or an empty string) picks `full` on a GPU and `cpu` otherwise.

What the cpu and smoke profiles do to each parameter is declared with it (`covlib.runs.parameters`); `model_list`
turns a notebook's `model` / `models` parameters into the models it compares ('' is the embedded model). The one door
that reads all of it is `covlib.runs.session.start`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Mapping, TypeVar

from covlib.core.devices import cuda_available
from covlib.generation.simulated import is_simulated, parse_sim, with_persona


T = TypeVar("T")
PROFILES = ("full", "cpu", "smoke")


def check_device(device: str | None, present: bool = True) -> None:
    """Refuse, before any work, a device this machine does not have: '' (the default), 'cpu', 'cuda', 'cuda:N', 'mps'
    (`present=False`: a device named right, here or not, as a plan for another machine takes)."""
    if not device:
        return
    if not isinstance(device, str) or not re.fullmatch(r"cpu|cuda(:\d+)?|mps", device.strip().lower()):
        raise ValueError(f"unknown device {device!r}: choose cpu, cuda, cuda:N or mps (empty: the default)")
    wanted = device.strip().lower()
    if wanted == "cpu" or not present:
        return
    import torch

    if wanted == "mps":
        if not torch.backends.mps.is_available():
            raise ValueError(f"device={device!r}, but this machine has no MPS (Apple GPU) backend: use device='' or 'cpu'")
        return
    if not cuda_available():
        raise ValueError(f"device={device!r}, but no CUDA GPU is visible here (torch.cuda.is_available() is False): "
                         "use device='' (the default: cuda where there is one, else cpu) or 'cpu'")
    index = int(wanted.split(":")[1]) if ":" in wanted else 0
    if index >= torch.cuda.device_count():
        raise ValueError(f"device={device!r}, but only {torch.cuda.device_count()} CUDA GPU(s) are visible")


def check_input_file(name: str, path: str | None) -> None:
    """Refuse, before any work, a file parameter that names no file ('' or None: not given)."""
    if path and not Path(path).expanduser().is_file():
        raise FileNotFoundError(f"{name}={path!r}: no such file (checked before the run starts)")


def resolve(profile: str | None, device: str | None = None, present: bool = True) -> str:
    """The concrete profile name for 'auto'/'' given the device (cuda -> full, else cpu); the device is checked
    (`check_device`: with `present`, that this machine has it)."""
    check_device(device, present)
    profile = (profile or "auto").strip().lower()
    if profile == "auto":
        if device:
            return "full" if device.startswith("cuda") else "cpu"
        return "full" if cuda_available() else "cpu"
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}: choose one of {', '.join(PROFILES)} or auto")
    return profile


def pick(profile: str, full: T, cpu: T | None = None, smoke: T | None = None) -> T:
    """The value for a resolved profile; `cpu`/`smoke` fall back to `full` when not given."""
    if profile not in PROFILES:
        raise ValueError(f"unresolved profile {profile!r}; call profiles.resolve first")
    value = {"full": full, "cpu": cpu, "smoke": smoke}[profile]
    return full if value is None else value


def model_list(model: str, models: str, profile: str, paper_models: Mapping[str, str]) -> list[str]:
    """The models a notebook compares: `models` (comma-separated), else `model`; `paper_models` (the paper's name:
    hub id) when neither is given in the full profile (a GPU box with the hub), else the embedded model (''). A
    simulated `model` without a persona stands for every paper model, simulated, in any profile."""
    listed = [m.strip() for m in models.split(",") if m.strip()]
    if listed:
        return listed
    if is_simulated(model) and not parse_sim(model)[1]:
        return [with_persona(model, name) for name in paper_models]
    if model:
        return [model]
    return list(paper_models.values()) if profile == "full" else [""]


def describe(profile: str, **chosen: object) -> str:
    """A one-line note of what the profile chose, with how to force the paper's settings."""
    parts = ", ".join(f"{k}={v}" for k, v in chosen.items())
    note = f"profile '{profile}': {parts}"
    if profile != "full":
        note += "  (paper settings: `make reproduce PROFILE=full`, or papermill -p profile full)"
    return note
