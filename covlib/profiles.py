"""Run profiles: the paper's settings, a CPU-sized subsample, or a smoke test.

| profile | when                          | what                                              |
|---------|-------------------------------|---------------------------------------------------|
| full    | default on a GPU              | the paper's settings (every notebook's defaults)  |
| cpu     | default without a GPU         | subsamples sized so all notebooks finish in ~1 h  |
| smoke   | CI (`make test`)              | a dozen examples, short generations               |

`auto` (or an empty string) picks `full` on a GPU and `cpu` otherwise.
"""

from __future__ import annotations

from typing import TypeVar

T = TypeVar("T")
PROFILES = ("full", "cpu", "smoke")


def resolve(profile: str | None, device: str | None = None) -> str:
    """The concrete profile name for 'auto'/'' given the device (cuda -> full, else cpu)."""
    profile = (profile or "auto").strip().lower()
    if profile == "auto":
        if device:
            return "full" if device.startswith("cuda") else "cpu"
        import torch

        return "full" if torch.cuda.is_available() else "cpu"
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}: choose one of {', '.join(PROFILES)} or auto")
    return profile


def pick(profile: str, full: T, cpu: T | None = None, smoke: T | None = None) -> T:
    """The value for a resolved profile; `cpu`/`smoke` fall back to `full` when not given."""
    if profile not in PROFILES:
        raise ValueError(f"unresolved profile {profile!r}; call profiles.resolve first")
    value = {"full": full, "cpu": cpu, "smoke": smoke}[profile]
    return full if value is None else value


def describe(profile: str, **chosen: object) -> str:
    """A one-line note of what the profile chose, with how to force the paper's settings."""
    parts = ", ".join(f"{k}={v}" for k, v in chosen.items())
    note = f"profile '{profile}': {parts}"
    if profile != "full":
        note += "  (paper settings: `make reproduce PROFILE=full`, or papermill -p profile full)"
    return note
