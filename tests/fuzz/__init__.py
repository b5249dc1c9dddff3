"""Fuzz targets of issue 32 (a package, so its module names cannot clash)."""
