"""PRISM scaling studies."""
