"""The spec layer: judge specs (TOML) and what they compile to — signatures, demos, text blocks, output types,
prepare functions and the family registry. Imports no DSPy at package level."""
