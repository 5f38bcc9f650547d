"""The diffusion reasoner's images and pieces: solution images that read back into checked
answers, the random solver, the network's shapes and errors, training that lowers the flow
matching loss, and sampling with its frames."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from embodia.policies.diffusion_reasoner import (
    PATH_COLOUR,
    DiffusionReasonerError,
    ReasonerTraining,
    SolutionNet,
    frames_to_pictures,
    puzzle_images,
    random_walk_answer,
    sample_solutions,
    solve,
    train_reasoner,
    training_pairs,
)


@pytest.mark.parametrize("name", ["maze", "frozenlake"])
def test_the_reference_solution_image_reads_back_into_a_correct_answer(name: str) -> None:
    images = puzzle_images(name)
    for seed in range(40):
        instance = images.task.generate(seed, "easy")
        puzzle, solution = images.pair(instance)
        assert puzzle.shape == solution.shape == (3, *images.native(instance).shape[:2])
        assert images.check(images.read_answer(solution, instance), instance).correct, seed
        # the puzzle itself paints nothing: no path is read from it
        assert images.read_answer(puzzle, instance) == ""


def test_a_maze_solution_paints_cells_and_the_corridors_between_them() -> None:
    images = puzzle_images("maze")
    instance = images.task.generate(3, "easy")
    native, solution = images.native(instance), images.solution(instance)
    assert native.shape == (11, 11, 3)
    painted = np.argwhere((solution == PATH_COLOUR).all(axis=-1))
    # every move crosses one corridor block and enters one cell; the goal keeps its colour
    assert len(painted) == 2 * len(instance.answer) - 1
    start = instance.facts["start"]
    assert tuple(native[2 * start[0] + 1, 2 * start[1] + 1]) == (40, 180, 60)


def test_a_broken_painted_path_stops_at_the_gap() -> None:
    images = puzzle_images("maze")
    instance = images.task.generate(5, "easy")
    solution = images.solution(instance)
    painted = [tuple(p) for p in np.argwhere((solution == PATH_COLOUR).all(axis=-1))]
    y, x = painted[len(painted) // 2]
    solution[y, x] = images.native(instance)[y, x]  # erase one block of the path
    image = solution.astype(np.float32).transpose(2, 0, 1) / 127.5 - 1
    moves = images.read_answer(image, instance)
    assert 0 < len(moves) < len(instance.answer)
    assert not images.check(moves, instance).correct


def test_the_random_solver_walks_through_open_cells_only() -> None:
    images = puzzle_images("maze")
    rng = random.Random(0)
    verdicts = []
    for seed in range(60):
        instance = images.task.generate(seed, "easy")
        moves = random_walk_answer(instance, images, rng)
        verdict = images.check(moves, instance)
        assert "wall" not in verdict.reason, verdict.reason
        verdicts.append(verdict.correct)
    assert 0 < np.mean(verdicts) < 0.6


def test_the_network_names_bad_shapes_and_paints_over_the_puzzle() -> None:
    model = SolutionNet(width=16, iterations=3)
    x = torch.zeros(2, 3, 11, 11)
    puzzle = torch.rand(2, 3, 11, 11)
    torch.nn.init.zeros_(model.head.weight)
    torch.nn.init.zeros_(model.head.bias)
    # the clean estimate is the puzzle plus what the head paints: a silent head returns the puzzle
    assert torch.equal(model(x, puzzle, torch.zeros(2)), puzzle)
    with pytest.raises(DiffusionReasonerError, match="of one shape"):
        model(x, torch.zeros(2, 3, 8, 8), torch.zeros(2))
    with pytest.raises(DiffusionReasonerError, match="one time per image"):
        model(x, x, torch.zeros(3))
    with pytest.raises(DiffusionReasonerError, match="width >= 8"):
        SolutionNet(width=4)
    with pytest.raises(DiffusionReasonerError, match="draws maze, frozenlake"):
        puzzle_images("sokoban")


def test_training_lowers_the_flow_matching_loss_and_sampling_keeps_frames() -> None:
    images = puzzle_images("frozenlake")
    puzzles, solutions, instances = training_pairs(images, range(200))
    torch.manual_seed(0)
    model = SolutionNet(width=16, iterations=4)
    losses: list[float] = []
    train_reasoner(
        model, puzzles, solutions, ReasonerTraining(steps=120, batch_size=16), lambda s, v: losses.append(v)
    )
    assert np.mean(losses[-10:]) < np.mean(losses[:10]) * 0.7
    frames: list[np.ndarray] = []
    drawn = sample_solutions(model, puzzles[:3], 4, generator=torch.Generator().manual_seed(0), frames=frames)
    assert drawn.shape == puzzles[:3].shape and len(frames) == 4
    pictures = frames_to_pictures(frames, 1, scale=4)
    assert (
        pictures[0].shape == (puzzles.shape[2] * 4, puzzles.shape[3] * 4, 3) and pictures[0].dtype == np.uint8
    )
    answers = solve(model, images, instances[:3], 2, samples=3)
    assert [len(a) for a in answers] == [3, 3, 3]
    assert all(set(moves) <= set("UDLR") for sampled in answers for moves in sampled)


def test_the_reasoner_learns_5x5_mazes_well_above_the_random_solver() -> None:
    """A CI-sized run (about a minute): 450 flow-matching steps on 6,000 mazes."""
    images = puzzle_images("maze")
    puzzles, solutions, _ = training_pairs(images, range(6000))
    held_out = [images.task.generate(seed, "easy") for seed in range(1_000_000, 1_000_100)]
    torch.manual_seed(0)
    model = SolutionNet(width=32, iterations=16)
    train_reasoner(model, puzzles, solutions, ReasonerTraining(steps=450, batch_size=32, learning_rate=3e-3))
    answers = solve(model, images, held_out, 4, samples=4)
    first = np.mean([images.check(a[0], i).correct for a, i in zip(answers, held_out, strict=True)])
    best_of_4 = np.mean(
        [any(images.check(m, i).correct for m in a) for a, i in zip(answers, held_out, strict=True)]
    )
    rng = random.Random(0)
    random_solver = np.mean([images.check(random_walk_answer(i, images, rng), i).correct for i in held_out])
    assert random_solver < 0.35
    assert first > random_solver + 0.15, (first, random_solver)
    # several samples of one puzzle, checked: never worse than one, here clearly better
    assert best_of_4 >= first + 0.1, (best_of_4, first)
