"""DiffThinker-style reasoning as image-to-image generation: a small conditional diffusion
model draws a puzzle's solution onto the puzzle's image, and the drawing is read back into an
answer that the puzzle's own checker grades exactly.

**Images** (:class:`PuzzleImages`): a puzzle is seen at its native resolution. A path puzzle
(:class:`PathImages`) is one pixel per cell (the puzzle renderer's image sampled at the cell
centres), so a 5x5 maze is an 11x11 image of walls, corridors, start and goal, and its
solution image is the same picture with the shortest path painted in :data:`PATH_COLOUR`; the
mazes (a path through corridors, walls between cells) and the FrozenLake grids (path planning
around holes) are read this way. A sudoku (:class:`DigitImages`) is a 9x9 image, each cell in
its digit's colour, and its solution colours every cell. A jigsaw (:class:`TileImages`) is the
shuffled picture shrunk to a few pixels a tile, and its solution is the picture reassembled.
All are scaled to [-1, 1].

**Model** (:class:`SolutionNet`): one residual block of two 3x3 convolutions, applied many times
with shared weights at the native resolution, reading the noisy image and the puzzle at every
pass (a recurrent denoiser: each pass can carry the path one block further, as dead-end
filling does). Its output is the clean solution: the puzzle plus what the network paints. A
UNet with self-attention at two coarser scales and a transformer over 2x2-block tokens (one
token per maze cell) were tried first, at a similar CPU budget: both stayed below the random
solver on 5x5 mazes (5% and 0%, against 23%) where this network reaches 84%.

**Training** (:func:`train_reasoner`): flow matching (rectified flow) with the clean image as
the target: ``x_t = (1 - t) noise + t solution``, t uniform, and the network's estimate of the
solution from ``x_t`` is regressed on it (mean squared error). Regressing the velocity
``solution - noise`` instead makes the network reproduce the noise through every pass: at the
same settings it reached 2.5% on held-out mazes where the clean-image target reached 23%.

**Sampling** (:func:`sample_solutions`): Euler steps of the velocity ``(estimate - x_t) / (1 - t)``
from noise at t=0 to t=1; the last step lands on the estimate. Few steps suffice, and the step
count trades time for accuracy. Each step's estimate can be kept as a frame: the visual
reasoning path. Several samples of one puzzle are a batch: that is the native parallelism, and
best-of-n keeps the first that the checker accepts.

**Reading** (``read_answer``): on a path, from the start, step to the unvisited neighbour whose
cell (and, in a maze, the corridor block between) is painted most clearly, until the goal or
a dead end; on a sudoku, each cell's nearest digit colour; on a jigsaw, the one-to-one
matching of the drawn tiles to the shown ones with the least squared distance. The answer
goes to the puzzle's checker.
"""

from __future__ import annotations

import math
import random
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional

from embodia.envs.puzzles.core import PuzzleInstance, PuzzleTask, Verdict
from embodia.envs.puzzles.frozenlake import FrozenLakeTask
from embodia.envs.puzzles.grid import MOVES
from embodia.envs.puzzles.jigsaw import JigsawTask, picture, tiles
from embodia.envs.puzzles.maze import MazeTask
from embodia.envs.puzzles.sudoku import SudokuTask
from embodia.errors import EmbodiaError

PATH_COLOUR = (60, 90, 220)
"""The colour a solution path is painted in."""


class DiffusionReasonerError(EmbodiaError, ValueError):
    """A diffusion reasoner, its puzzle or its inputs cannot be used; the message names them."""


# --------------------------------------------------------------------------- puzzle images


def _to_unit(image: np.ndarray) -> np.ndarray:
    return np.asarray(image, dtype=np.float32).transpose(2, 0, 1) / 127.5 - 1.0


def _to_pixels(image: np.ndarray) -> np.ndarray:
    return np.asarray(
        np.clip((np.asarray(image).transpose(1, 2, 0) + 1.0) * 127.5, 0, 255).round(), dtype=np.uint8
    )


class PuzzleImages(ABC):
    """A puzzle as the reasoner sees it: ``task`` generates, renders and checks the instances;
    :meth:`native` is the puzzle image, :meth:`solution` the same picture solved, and
    :meth:`read_answer` reads a drawn solution back into an answer the task's checker grades."""

    def __init__(self, task: PuzzleTask, difficulty: str = "easy") -> None:
        self.task, self.difficulty = task, difficulty

    @property
    def name(self) -> str:
        return self.task.name

    @abstractmethod
    def native(self, instance: PuzzleInstance) -> np.ndarray:
        """The puzzle image (``H x W x 3`` uint8)."""

    @abstractmethod
    def solution(self, instance: PuzzleInstance) -> np.ndarray:
        """The solved puzzle image, of the puzzle image's shape."""

    @abstractmethod
    def read_answer(self, image: np.ndarray, instance: PuzzleInstance) -> Any:
        """The answer a drawn solution (``3 x H x W`` in [-1, 1]) shows."""

    @abstractmethod
    def random_answer(self, instance: PuzzleInstance, rng: random.Random) -> Any:
        """The random solver's answer: a uniform guess that keeps to what the puzzle shows."""

    def pair(self, instance: PuzzleInstance) -> tuple[np.ndarray, np.ndarray]:
        """(puzzle, solution) as ``3 x H x W`` float arrays in [-1, 1]."""
        return _to_unit(self.native(instance)), _to_unit(self.solution(instance))

    def check(self, answer: Any, instance: PuzzleInstance) -> Verdict:
        return self.task.check(answer, instance)


class PathImages(PuzzleImages):
    """A path puzzle (a maze or a FrozenLake grid) as one pixel per cell (module docstring)."""

    def _maze(self) -> bool:
        return isinstance(self.task, MazeTask)

    def _side(self, instance: PuzzleInstance) -> int:
        facts = instance.facts
        return 2 * int(facts["rows"]) + 1 if self._maze() else int(facts["size"])

    def native(self, instance: PuzzleInstance) -> np.ndarray:
        """The puzzle's render sampled at its cells' centres (``side x side x 3`` uint8)."""
        render = self.task.render(instance)
        side = self._side(instance)
        step = render.shape[0] // side
        return np.ascontiguousarray(render[step // 2 :: step, step // 2 :: step][:side, :side])

    def _path_pixels(self, instance: PuzzleInstance) -> list[tuple[int, int]]:
        start = tuple(instance.facts["start"])
        pixels = []
        r, c = start
        for move in str(instance.answer):
            dr, dc = MOVES[move]
            if self._maze():
                pixels.append((2 * r + 1 + dr, 2 * c + 1 + dc))  # the corridor block crossed
            r, c = r + dr, c + dc
            pixels.append((2 * r + 1, 2 * c + 1) if self._maze() else (r, c))
        return pixels[:-1]  # the goal keeps its own colour

    def solution(self, instance: PuzzleInstance) -> np.ndarray:
        """The native image with the reference shortest path painted."""
        image = self.native(instance).copy()
        for y, x in self._path_pixels(instance):
            image[y, x] = PATH_COLOUR
        return image

    def painted(self, image: np.ndarray, instance: PuzzleInstance) -> np.ndarray:
        """Per native pixel, how clearly ``image`` (``3 x S x S`` in [-1, 1]) paints it: the
        distance to its unpainted colour minus the distance to :data:`PATH_COLOUR` (positive:
        painted)."""
        pixels = _to_pixels(image).astype(np.float32)
        plain = self.native(instance).astype(np.float32)
        to_path = np.linalg.norm(pixels - np.asarray(PATH_COLOUR, np.float32), axis=-1)
        to_plain = np.linalg.norm(pixels - plain, axis=-1)
        return np.asarray(to_plain - to_path)

    def _open_steps(
        self, instance: PuzzleInstance, cell: tuple[int, int]
    ) -> list[tuple[str, tuple[int, int]]]:
        """The moves from ``cell`` that stay on the grid, as (move, next cell)."""
        facts = instance.facts
        n = int(facts["rows"]) if self._maze() else int(facts["size"])
        steps = []
        for move, (dr, dc) in MOVES.items():
            r, c = cell[0] + dr, cell[1] + dc
            if 0 <= r < n and 0 <= c < n:
                steps.append((move, (r, c)))
        return steps

    def read_answer(self, image: np.ndarray, instance: PuzzleInstance) -> str:
        """The moves the painted path makes (module docstring)."""
        score = self.painted(image, instance)
        facts = instance.facts
        goal = tuple(facts["goal"])
        cell = tuple(facts["start"])
        seen = {cell}
        moves: list[str] = []
        while cell != goal and len(moves) < score.size:
            best: tuple[float, str, tuple[int, int]] | None = None
            for move, (r, c) in self._open_steps(instance, cell):
                if (r, c) in seen:
                    continue
                if self._maze():
                    dr, dc = MOVES[move]
                    between = score[2 * cell[0] + 1 + dr, 2 * cell[1] + 1 + dc]
                    target = math.inf if (r, c) == goal else score[2 * r + 1, 2 * c + 1]
                    value = min(float(between), float(target))
                else:
                    value = math.inf if (r, c) == goal else float(score[r, c])
                if value > 0 and (best is None or value > best[0]):
                    best = (value, move, (r, c))
            if best is None:
                break
            moves.append(best[1])
            cell = best[2]
            seen.add(cell)
        return "".join(moves)

    def random_answer(self, instance: PuzzleInstance, rng: random.Random) -> str:
        """From the start, a uniformly random step to an unvisited open neighbour, until the
        goal or a dead end (a walker that sees the walls and holes)."""
        facts = instance.facts
        goal, cell = tuple(facts["goal"]), tuple(facts["start"])
        seen, moves = {cell}, []
        while cell != goal:
            options = []
            for move, (r, c) in self._open_steps(instance, cell):
                dr, dc = MOVES[move]
                blocked = (
                    facts["grid"][2 * cell[0] + 1 + dr][2 * cell[1] + 1 + dc] != "."
                    if self._maze()
                    else facts["rows"][r][c] == "H"
                )
                if (r, c) not in seen and not blocked:
                    options.append((move, (r, c)))
            if not options:
                break
            move, cell = options[rng.randrange(len(options))]
            moves.append(move)
            seen.add(cell)
        return "".join(moves)


DIGIT_COLOURS = np.array(
    [
        (255, 255, 255),  # an empty cell
        (230, 25, 75),
        (60, 180, 75),
        (255, 225, 25),
        (0, 130, 200),
        (245, 130, 48),
        (145, 30, 180),
        (70, 240, 240),
        (240, 50, 230),
        (128, 128, 0),
    ],
    dtype=np.uint8,
)
"""A sudoku cell's colour by digit (0: empty): nine colours far apart in RGB."""


class DigitImages(PuzzleImages):
    """A sudoku as a 9x9 image, one pixel per cell in its digit's colour (:data:`DIGIT_COLOURS`,
    white when empty); the solution colours every cell. A drawn cell reads as the digit of the
    nearest colour. (The rendered glyphs would need a glyph reader and an image 30 times larger;
    the colour keeps the reasoner's job the puzzle's, not reading digits.)"""

    @staticmethod
    def _digits(text: str) -> np.ndarray:
        return np.frombuffer(text.encode(), dtype=np.uint8).reshape(9, 9) - ord("0")

    def native(self, instance: PuzzleInstance) -> np.ndarray:
        return DIGIT_COLOURS[self._digits(instance.facts["givens"])]

    def solution(self, instance: PuzzleInstance) -> np.ndarray:
        return DIGIT_COLOURS[self._digits(str(instance.answer))]

    def read_answer(self, image: np.ndarray, instance: PuzzleInstance) -> str:
        pixels = _to_pixels(image).astype(np.float32)[:, :, None, :]
        distance = ((pixels - DIGIT_COLOURS[None, None, 1:].astype(np.float32)) ** 2).sum(axis=-1)
        return "".join(str(int(d) + 1) for d in distance.argmin(axis=-1).ravel())

    def random_answer(self, instance: PuzzleInstance, rng: random.Random) -> str:
        """Each empty cell a uniform pick among the digits no given of its row, column or box
        holds."""
        grid = self._digits(instance.facts["givens"])
        cells = []
        for r in range(9):
            for c in range(9):
                if grid[r, c]:
                    cells.append(str(grid[r, c]))
                    continue
                box = grid[3 * (r // 3) : 3 * (r // 3) + 3, 3 * (c // 3) : 3 * (c // 3) + 3]
                taken = {*grid[r].tolist(), *grid[:, c].tolist(), *box.ravel().tolist()}
                cells.append(str(rng.choice([d for d in range(1, 10) if d not in taken] or [1])))
        return "".join(cells)


class TileImages(PuzzleImages):
    """A jigsaw as its shuffled picture shrunk to ``tile_pixels`` pixels a tile side; the
    solution is the original picture at the same size. A drawn solution is read by matching
    each of its tiles to the puzzle's tiles (least squared distance over a one-to-one
    assignment), which gives the permutation the checker grades."""

    def __init__(self, task: PuzzleTask, difficulty: str = "easy", tile_pixels: int = 4) -> None:
        super().__init__(task, difficulty)
        if tile_pixels < 1:
            raise DiffusionReasonerError(f"a tile needs at least one pixel a side, got {tile_pixels}")
        self.tile_pixels = tile_pixels

    def _shrunk(self, picture: np.ndarray, k: int) -> np.ndarray:
        from PIL import Image

        side = k * self.tile_pixels
        return np.asarray(Image.fromarray(picture).resize((side, side), Image.Resampling.BOX))

    def native(self, instance: PuzzleInstance) -> np.ndarray:
        return self._shrunk(self.task.render(instance), int(instance.facts["k"]))

    def solution(self, instance: PuzzleInstance) -> np.ndarray:
        facts = instance.facts
        k = int(facts["k"])
        return self._shrunk(picture(int(facts["picture_seed"]), k * int(facts["tile_px"])), k)

    def _tiles(self, image: np.ndarray, k: int) -> np.ndarray:
        return tiles(np.asarray(image, np.float32).transpose(1, 2, 0), k).reshape(k * k, -1)

    def read_answer(self, image: np.ndarray, instance: PuzzleInstance) -> list[int]:
        from scipy.optimize import linear_sum_assignment

        k = int(instance.facts["k"])
        shown = self._tiles(_to_unit(self.native(instance)), k)  # the puzzle alone: no solution render
        drawn = self._tiles(image, k)
        cost = ((shown[:, None, :] - drawn[None, :, :]) ** 2).sum(axis=-1)
        positions, originals = linear_sum_assignment(cost)
        answer = [0] * (k * k)
        for position, original in zip(positions, originals, strict=True):
            answer[int(position)] = int(original)  # shuffled position -> the original tile it shows
        return answer

    def random_answer(self, instance: PuzzleInstance, rng: random.Random) -> list[int]:
        """A uniformly random permutation of the tiles."""
        k = int(instance.facts["k"])
        return rng.sample(range(k * k), k * k)


def puzzle_images(name: str, difficulty: str = "easy") -> PuzzleImages:
    """The image view of puzzle ``name``: ``maze``, ``frozenlake``, ``sudoku`` or ``jigsaw``."""
    views: dict[str, Callable[[], PuzzleImages]] = {
        "maze": lambda: PathImages(MazeTask(), difficulty),
        "frozenlake": lambda: PathImages(FrozenLakeTask(), difficulty),
        "sudoku": lambda: DigitImages(SudokuTask(), difficulty),
        "jigsaw": lambda: TileImages(JigsawTask(), difficulty),
    }
    if name not in views:
        raise DiffusionReasonerError(f"the diffusion reasoner draws {', '.join(views)}; got {name!r}")
    return views[name]()


# --------------------------------------------------------------------------- the network


def _time_features(t: torch.Tensor, dims: int) -> torch.Tensor:
    half = dims // 2
    frequencies = torch.exp(-math.log(10_000.0) * torch.arange(half, dtype=torch.float32) / half)
    angles = 1000.0 * t[:, None] * frequencies[None, :]
    return torch.cat([angles.sin(), angles.cos()], dim=1)


class SolutionNet(nn.Module):
    """The velocity of the solution image given the noisy solution, the puzzle image and the
    time (module docstring): one residual block of two 3x3 convolutions, applied
    ``iterations`` times with shared weights at the puzzle's native resolution, the inputs
    re-read at every pass and the time entering as a per-channel scale and shift."""

    def __init__(self, width: int = 48, iterations: int = 20, image_channels: int = 3) -> None:
        super().__init__()
        if width < 8 or iterations < 1:
            raise DiffusionReasonerError(
                f"the network needs width >= 8 and iterations >= 1, got {width} and {iterations}"
            )
        self.width, self.iterations, self.image_channels = width, iterations, image_channels
        self.time = nn.Sequential(nn.Linear(width, 2 * width), nn.SiLU(), nn.Linear(2 * width, 2 * width))
        self.stem = nn.Conv2d(2 * image_channels, width, 3, padding=1)
        self.mix = nn.Conv2d(width + 2 * image_channels, width, 3, padding=1)
        self.update = nn.Conv2d(width, width, 3, padding=1)
        self.head = nn.Conv2d(width, image_channels, 3, padding=1)

    def forward(self, noisy: torch.Tensor, puzzle: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        if noisy.shape != puzzle.shape or noisy.ndim != 4 or noisy.shape[1] != self.image_channels:
            raise DiffusionReasonerError(
                f"the noisy solution and the puzzle are N x {self.image_channels} x H x W of one shape, "
                f"got {tuple(noisy.shape)} and {tuple(puzzle.shape)}"
            )
        if t.shape != (len(noisy),):
            raise DiffusionReasonerError(
                f"t holds one time per image ({len(noisy)}), got shape {tuple(t.shape)}"
            )
        inputs = torch.cat([noisy, puzzle], dim=1)
        scale, shift = self.time(_time_features(t, self.width))[:, :, None, None].chunk(2, dim=1)
        h = functional.relu(self.stem(inputs))
        for _ in range(self.iterations):
            mixed = self.mix(torch.cat([h, inputs], dim=1)) * (1 + scale) + shift
            h = functional.relu(h + self.update(functional.relu(mixed)))
        return puzzle + self.head(h)


# --------------------------------------------------------------------------- training and sampling


@dataclass(frozen=True)
class ReasonerTraining:
    steps: int = 3000
    batch_size: int = 64
    learning_rate: float = 1e-3
    seed: int = 0


def train_reasoner(
    model: SolutionNet,
    puzzles: torch.Tensor,
    solutions: torch.Tensor,
    settings: ReasonerTraining,
    log: Callable[[int, float], None] | None = None,
) -> None:
    """Flow matching on (puzzle, solution) pairs (module docstring); AdamW with a cosine
    decay after a short warm-up; ``log(step, loss)`` after every step."""
    if puzzles.shape != solutions.shape or puzzles.ndim != 4 or len(puzzles) == 0:
        raise DiffusionReasonerError(
            f"training needs puzzles and solutions of one shape N x C x S x S, got {tuple(puzzles.shape)} "
            f"and {tuple(solutions.shape)}"
        )
    generator = torch.Generator().manual_seed(settings.seed)
    torch.manual_seed(settings.seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=settings.learning_rate, weight_decay=1e-4)
    warmup = max(1, settings.steps // 20)

    def rate(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, settings.steps - warmup)))

    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, rate)
    model.train()
    for step in range(1, settings.steps + 1):
        batch = torch.randint(len(puzzles), (settings.batch_size,), generator=generator)
        target, condition = solutions[batch], puzzles[batch]
        noise = torch.randn(target.shape, generator=generator)
        t = torch.rand(len(batch), generator=generator)
        noisy = (1 - t[:, None, None, None]) * noise + t[:, None, None, None] * target
        loss = functional.mse_loss(model(noisy, condition, t), target)
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        if log is not None:
            log(step, float(loss.detach()))
    model.eval()


def sample_solutions(
    model: SolutionNet,
    puzzles: torch.Tensor,
    steps: int,
    *,
    generator: torch.Generator | None = None,
    frames: list[np.ndarray] | None = None,
) -> torch.Tensor:
    """Solutions of ``puzzles`` (``N x C x S x S``) by ``steps`` Euler steps of the learned flow;
    with ``frames``, each step's estimate of the clean solutions is appended to it."""
    if steps < 1:
        raise DiffusionReasonerError(f"sampling needs at least one step, got {steps}")
    model.eval()
    x = torch.randn(puzzles.shape, generator=generator)
    with torch.no_grad():
        for i in range(steps):
            clean = model(x, puzzles, torch.full((len(puzzles),), i / steps))
            if frames is not None:
                frames.append(clean.numpy())
            # the velocity (clean - x) / (1 - t) times the step 1 / steps
            x = x + (clean - x) / (steps - i)
    return x


def frames_to_pictures(frames: Sequence[np.ndarray], index: int, scale: int = 16) -> list[np.ndarray]:
    """Sample ``index``'s frames as RGB pictures, each pixel a ``scale`` x ``scale`` square."""
    return [_to_pixels(frame[index]).repeat(scale, axis=0).repeat(scale, axis=1) for frame in frames]


def solve(
    model: SolutionNet,
    images: PuzzleImages,
    instances: Sequence[PuzzleInstance],
    steps: int,
    *,
    samples: int = 1,
    seed: int = 0,
) -> list[list[Any]]:
    """Per instance, the answers read from ``samples`` sampled solution images (one batch)."""
    if samples < 1:
        raise DiffusionReasonerError(f"samples must be at least 1, got {samples}")
    puzzles = torch.as_tensor(np.stack([images.pair(i)[0] for i in instances]))
    repeated = puzzles.repeat_interleave(samples, dim=0)
    drawn = sample_solutions(model, repeated, steps, generator=torch.Generator().manual_seed(seed)).numpy()
    return [
        [images.read_answer(drawn[k * samples + s], instance) for s in range(samples)]
        for k, instance in enumerate(instances)
    ]


def training_pairs(
    images: PuzzleImages, seeds: Sequence[int]
) -> tuple[torch.Tensor, torch.Tensor, list[Any]]:
    """Puzzle and solution tensors of the instances ``seeds`` (and the instances)."""
    instances = [images.task.generate(seed, images.difficulty) for seed in seeds]
    pairs = [images.pair(i) for i in instances]
    return (
        torch.as_tensor(np.stack([p for p, _ in pairs])),
        torch.as_tensor(np.stack([s for _, s in pairs])),
        instances,
    )
