"""Helpers for the notebook course, one module per kind (views, frames, plots, explorers,
exercises, ...). pandas, matplotlib and ipywidgets are imported on first use, never here.
"""
