"""``python -m executor`` is the ``corral`` command."""

from executor.cli import main

main()
