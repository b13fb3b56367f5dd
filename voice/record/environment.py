"""What a report must say about where and how it was measured (docs/timing.md): hardware, OS, Python
and library versions. Settings and models are added by the command that ran."""

from __future__ import annotations

import os
import platform
from importlib import metadata
from pathlib import Path

PACKAGES = ("ttfat", "torch", "faster-whisper", "ctranslate2", "piper-tts", "onnxruntime",
            "webrtcvad-wheels", "openai", "numpy")  # fmt: skip


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def gpu_count() -> int:
    try:
        import ctranslate2

        return ctranslate2.get_cuda_device_count()
    except (ImportError, RuntimeError):
        return 0


def versions() -> dict[str, str]:
    out = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def environment(**settings) -> dict:
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30 if hasattr(os, "sysconf") else 0
    return {
        "hardware": {
            "cpu": cpu_name(),
            "cores": os.cpu_count(),
            "memory_gib": round(memory, 1),
            "cuda_gpus": gpu_count(),
        },
        "os": platform.platform(),
        "python": platform.python_version(),
        "versions": versions(),
        **settings,
    }
