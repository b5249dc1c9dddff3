"""The SQL store: the algorithm once (``_common``), its schema (``_schema``), with the
SQLite and PostgreSQL dialects (``_sqlite``, ``_postgres``)."""
