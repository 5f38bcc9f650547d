"""Environments and the simulators under them.

``envs.sim`` is the embedded CPU simulator (the default backend); ``envs.habitat`` wraps
``habitat_sim`` behind the same protocol and is imported lazily; ``envs.dsr`` is DSR-Bench;
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
