"""Browser tests: the course in JupyterLab under headless Chromium (issue 8)."""
