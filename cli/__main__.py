"""``python -m embodia.cli``: the ``embodia`` command."""

from embodia.cli import main

main()
