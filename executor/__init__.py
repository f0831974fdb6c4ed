"""How a child runs: the model loop, tool dispatch, delegation, results, and the CLI."""
