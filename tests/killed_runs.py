"""A recipe run killed (SIGKILL) after a given SFT step, in a subprocess: what a crash or an
out-of-memory kill leaves for ``resume=True`` to continue from."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

SCRIPT = """
import os, signal, sys
from pathlib import Path
import torch
torch.set_num_threads({threads})  # the parent's: the killed run must compute what the whole one does
from transformers import TrainerCallback
from embodia.policies.recipes import sft
from {module} import {settings_class}
import {module} as recipe

class Kill(TrainerCallback):
    def on_step_end(self, args, state, control, **_):
        if state.global_step == {step}:
            os.kill(os.getpid(), signal.SIGKILL)

def run_sft(*args, callbacks=(), **kwargs):
    return sft.run_sft(*args, callbacks=[*callbacks, Kill()], **kwargs)

recipe.run_sft = run_sft
recipe.{runner}({settings_class}(**{fields}), Path(sys.argv[1]))
"""


def kill_after_step(settings: Any, runner: str, out: Path, step: int) -> subprocess.CompletedProcess[str]:
    """Run ``runner`` (a function of the module that defines ``settings``' class, which calls
    ``run_sft``) on ``settings`` into ``out`` in a subprocess killed at the end of SFT step
    ``step``, on as many torch threads as this process uses (with Adam, the last-bit differences
    of another thread count's sums grow into differences of a learning rate)."""
    import torch

    cls = type(settings)
    fields = {name: getattr(settings, name) for name in cls.__dataclass_fields__}
    script = textwrap.dedent(SCRIPT).format(
        module=cls.__module__,
        settings_class=cls.__name__,
        runner=runner,
        step=step,
        fields=repr(fields),
        threads=torch.get_num_threads(),
    )
    return subprocess.run(
        [sys.executable, "-c", script, str(out)], capture_output=True, text=True, check=False
    )
