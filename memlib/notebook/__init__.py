"""Helpers for the notebook course, one module per kind; nothing here is imported eagerly.

- ``views``: ``view(store, query, as_of, limit)`` per pipeline stage, and views compared
  over queries, limits or stores.
- ``frames``: library values (records, candidates, a score, results, files) as tables.
- ``plots``: matplotlib pictures of those views and frames.
- ``explorers``: an ipywidgets form that redraws any view.
- ``refusals``: refusals and checks as error tables.
- ``exercises``: the graded exercises, ``check(id, answer)`` and ``hint(id)``; one module
  per notebook.
- ``boundaries``: notebook 13's no-key probe, checklist audit and review view.
- ``mcp_session``: notebook 10's MCP client session with ``memlib mcp``, as a table.
- ``reports``: the packaged copies of the reports notebooks 11 and 12 chart (``load_report``).
- ``slides``: RISE slide metadata from each notebook's outline.
- ``solutions``: writes each notebook's solution twin under ``notebooks/solutions/``.
- ``fixtures``: stores and damaged files built for the course (course-only; each writes
  only under the folder or file it is given).

pandas, matplotlib and ipywidgets are imported on first use, never by importing these.
"""
