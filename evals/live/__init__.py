"""Live Gaming Benchmark metrics (being split into modules; see timing.py for now)."""

from embodia.evals.live.timing import *  # noqa: F403
from embodia.evals.live.timing import f1, rouge_l  # noqa: F401
