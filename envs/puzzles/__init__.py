"""Visual reasoning puzzles (maze, sudoku, jigsaw, frozenlake, tsp, clevr, clevr-describe, embodied).

Tasks are registered as ``"module:Class"`` strings and imported on first use, so importing
this package stays cheap and a task with heavy or optional dependencies costs nothing until
asked for.
"""

from __future__ import annotations

import importlib

from embodia.envs.puzzles.core import (
    DIFFICULTIES,
    Parsed,
    PuzzleError,
    PuzzleInstance,
    PuzzleTask,
    Verdict,
    find_answer,
)

TASKS: dict[str, str] = {
    "maze": "embodia.envs.puzzles.maze:MazeTask",
    "sudoku": "embodia.envs.puzzles.sudoku:SudokuTask",
    "jigsaw": "embodia.envs.puzzles.jigsaw:JigsawTask",
    "frozenlake": "embodia.envs.puzzles.frozenlake:FrozenLakeTask",
    "tsp": "embodia.envs.puzzles.tsp:TSPTask",
    "clevr": "embodia.envs.puzzles.clevr:ClevrTask",
    "clevr-describe": "embodia.envs.puzzles.clevr:ClevrDescribeTask",
    "embodied": "embodia.envs.puzzles.embodied:EmbodiedTask",
}

_INSTANCES: dict[str, PuzzleTask] = {}


def make_task(name: str) -> PuzzleTask:
    """The task registered under ``name`` (one shared instance per name; tasks are stateless)."""
    if name not in TASKS:
        raise PuzzleError(f"unknown puzzle task {name!r}; known: {', '.join(sorted(TASKS))}")
    if name not in _INSTANCES:
        module_name, _, class_name = TASKS[name].partition(":")
        cls = getattr(importlib.import_module(module_name), class_name)
        _INSTANCES[name] = cls()
    return _INSTANCES[name]


__all__ = [
    "DIFFICULTIES",
    "TASKS",
    "Parsed",
    "PuzzleError",
    "PuzzleInstance",
    "PuzzleTask",
    "Verdict",
    "find_answer",
    "make_task",
]
