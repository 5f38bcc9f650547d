"""Pure-Python reference implementations of the DSR-Bench data structures, one module per category.

Importing a category module registers its operations in :data:`embodia.envs.dsr.core.OPERATIONS`.
The hierarchical category keeps each of its four structures in a module of its own
(:mod:`.bst`, :mod:`.heap`, :mod:`.red_black`, :mod:`.b_plus_tree`), which
:mod:`.hierarchical` registers.
"""
