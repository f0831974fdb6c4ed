"""Where a child runs: worktrees, bubblewrap and docker backends, supervised processes.

Imports go one way: ``executor -> sandbox -> policies``; nothing here imports
``executor``.
"""
