"""Running an agent: one run tree, from its checks to its record."""

__all__: list[str] = []
