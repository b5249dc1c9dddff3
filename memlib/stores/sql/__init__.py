"""The SQL store: the algorithm once (``_common``), with the SQLite and PostgreSQL
dialects (``_sqlite``, ``_postgres``)."""
