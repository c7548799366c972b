"""Data sets and file formats."""
