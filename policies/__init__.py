"""What an agent may do: contracts, the tool catalog, capabilities, permissions, the loader.

Pure data and rules: this package reads definition files and nothing else,
and imports neither ``sandbox`` nor ``executor``.
"""
