"""Helpers for the notebook course, one module per kind (views, frames, plots, explorers,
exercises, ...); each module's docstring says what it holds.

pandas, matplotlib and ipywidgets are imported on first use, never by importing these.
"""
