"""Gymnasium environments, with their tasks and their measures.

``envs.mapping`` is active mapping in a simulator (``embodia.sim``); ``envs.dsr`` is DSR-Bench;
``envs.streams`` holds the live game streams; ``envs.puzzles`` the visual reasoning puzzles.

Importing ``embodia.envs`` registers the gymnasium ids (gymnasium 1.x has no entry-point
plugin group), so ``gymnasium.make("embodia/ActiveMapping-v0")`` works afterwards.
"""

from embodia.envs.dsr.env import register_envs as _register_dsr_envs
from embodia.envs.mapping import register_envs as _register_mapping_envs
from embodia.envs.puzzles.env import register_envs as _register_puzzle_envs
from embodia.envs.streams.env import register_envs as _register_stream_envs

_register_mapping_envs()
_register_dsr_envs()
_register_stream_envs()
_register_puzzle_envs()
