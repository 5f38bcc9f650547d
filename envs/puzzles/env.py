"""``embodia/Puzzle-v0``: one visual reasoning puzzle per episode.

``task`` picks the puzzle (maze, sudoku, jigsaw, frozenlake, tsp, clevr, embodied) and
``difficulty`` its size. Observation: ``image`` (the rendered puzzle, resized to
``image_size`` so the space is fixed) and ``prompt`` (the question with its answer format).
Action: the model's reply text. Reward: the task's score of the reply (1 for a correct
answer, partial credit where the task defines it, 0 for an unreadable reply).
``reset(options={"seed": N})`` picks the instance; otherwise it is drawn from the env's
seeded generator. With ``text=True`` the prompt also carries the puzzle's text drawing (maze,
sudoku, frozenlake and tsp have one), so a text-only policy can solve it.

The truth never reaches anything an agent sees by default: ``reset``'s ``info`` names the
instance (``task``, ``difficulty``, ``seed``) without its answer or facts, because code that
forwards ``info`` into a prompt would leak them. The whole record, answer included, comes from
the explicit :meth:`PuzzleEnv.ground_truth` (for graders and oracles), and with ``step``'s
``info`` (``correct``, ``reason``, ``instance``) once the episode has ended.
"""

from __future__ import annotations

import string
from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces
from PIL import Image

from embodia.envs import registry
from embodia.envs.puzzles import make_task
from embodia.envs.puzzles.core import PuzzleError, PuzzleInstance

_CHARSET = frozenset(string.printable)
TEXT_LIMIT = 100_000


class PuzzleEnv(gymnasium.Env[dict[str, Any], str]):
    metadata: dict[str, Any] = {"render_modes": ["rgb_array"]}

    def __init__(
        self,
        task: str = "maze",
        difficulty: str = "medium",
        image_size: int = 256,
        render_mode: str | None = None,
        text: bool = False,
    ) -> None:
        self.task = make_task(task)
        if text and not self.task.drawn_as_text:
            raise PuzzleError(f"the {task} puzzle has no text drawing, so text=True cannot show it")
        self.text = bool(text)
        if difficulty not in self.task.difficulties:
            raise PuzzleError(
                f"unknown difficulty {difficulty!r}: expected one of {', '.join(self.task.difficulties)}"
            )
        if image_size < 16:
            raise PuzzleError(f"image_size must be at least 16 pixels, got {image_size}")
        self.difficulty = difficulty
        self.image_size = image_size
        self.render_mode = render_mode
        prompt_space = spaces.Text(max_length=TEXT_LIMIT, min_length=0, charset=_CHARSET)
        self.observation_space = spaces.Dict(
            {"image": spaces.Box(0, 255, (image_size, image_size, 3), np.uint8), "prompt": prompt_space}
        )
        self.action_space = spaces.Text(max_length=TEXT_LIMIT, min_length=0, charset=_CHARSET)
        self.instance: PuzzleInstance | None = None

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        super().reset(seed=seed)
        options = options or {}
        instance_seed = (
            int(options["seed"]) if "seed" in options else int(self.np_random.integers(0, 2**31 - 1))
        )
        difficulty = str(options.get("difficulty", self.difficulty))
        self.instance = self.task.generate(instance_seed, difficulty)
        named = {
            "task": self.instance.task,
            "difficulty": self.instance.difficulty,
            "seed": self.instance.seed,
        }
        return self._observation(), {"instance": named}

    def ground_truth(self) -> dict[str, Any]:
        """The current instance's whole record: its answer and the facts behind it. For graders
        and oracles only: this is what a policy must never be shown."""
        if self.instance is None:
            raise PuzzleError("ground_truth() called before reset()")
        return self.instance.to_record()

    def _observation(self) -> dict[str, Any]:
        assert self.instance is not None
        image = Image.fromarray(np.asarray(self.instance.image)).resize((self.image_size, self.image_size))
        prompt = self.instance.prompt
        if self.text:
            prompt = f"{prompt}\n\n{self.task.text(self.instance)}"
        prompt = "".join(c if c in _CHARSET else "?" for c in prompt)
        return {"image": np.asarray(image.convert("RGB"), dtype=np.uint8), "prompt": prompt}

    def step(self, action: str) -> tuple[dict[str, Any], float, bool, bool, dict[str, Any]]:
        if self.instance is None:
            raise PuzzleError("step() called before reset()")
        if not isinstance(action, str):
            raise PuzzleError(f"the action is the reply text (str), got {type(action).__name__}")
        verdict = self.task.score(action, self.instance)
        info = {"correct": verdict.correct, "reason": verdict.reason, "instance": self.instance.to_record()}
        return self._observation(), float(verdict.score), True, False, info

    def render(self) -> Any:
        return None if self.instance is None else np.asarray(self.instance.image)


def register_envs() -> None:
    """Register this package's ids (``registry.entry_points("puzzles")``) with gymnasium; ids already
    registered are left alone. ``import embodia`` has done it already."""
    registry.register_envs(list(registry.entry_points("puzzles")))
