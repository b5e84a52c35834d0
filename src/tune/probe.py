"""Environment probe of `kernel-builder tune` (run by the Python that will tune).

Prints one JSON object on stdout: {"ok": true, ...versions and device...} or
{"ok": false, "problem": "no-torch" | "no-helion" | "no-triton" | "no-gpu", "detail": "..."}.
Exit status 0 either way; anything else (a crash) is the caller's to report.
"""

import datetime
import json
import platform
import subprocess
import sys
import traceback


def fail(problem, detail):
    print(json.dumps({"ok": False, "problem": problem, "detail": detail}))
    sys.exit(0)


def short_error(err):
    return "".join(traceback.format_exception_only(type(err), err)).strip()


try:
    import torch
except Exception as err:  # ImportError, or a broken install raising anything else
    fail("no-torch", short_error(err))
try:
    import helion  # noqa: F401
    from helion._hardware import get_hardware_info
except Exception as err:
    fail("no-helion", short_error(err))
try:
    import triton
except Exception as err:
    fail("no-triton", short_error(err))

from importlib import metadata


def version(name):
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return getattr(sys.modules.get(name), "__version__", "unknown")


cuda = torch.cuda.is_available()
xpu = hasattr(torch, "xpu") and torch.xpu.is_available()
if not (cuda or xpu):
    fail(
        "no-gpu",
        f"torch {torch.__version__} sees no GPU (torch.cuda.is_available() is False, "
        f"CUDA build {torch.version.cuda}, no XPU)",
    )
try:
    hw = get_hardware_info()
except Exception as err:
    fail("no-gpu", "helion cannot describe the device: " + short_error(err))

driver = "unknown"
if cuda and torch.version.hip is None:
    try:
        driver = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader", "-i", "0"],
            capture_output=True, text=True, timeout=30, check=True,
        ).stdout.strip() or "unknown"
    except Exception:
        pass
print(json.dumps({
    "ok": True,
    "python": platform.python_version(),
    "torch": torch.__version__,
    "triton": version("triton"),
    "helion": version("helion"),
    "cuda": torch.version.cuda or torch.version.hip or "none",
    "driver": driver,
    "device_name": torch.cuda.get_device_name() if cuda else torch.xpu.get_device_name(),
    "device_kind": hw.device_kind,
    "compute": hw.compute_capability,
    "hardware_id": hw.hardware_id,
    "utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S"),
}))
