"""The default store: one append-only JSON-lines log per user scope, with its index and
vectors beside it (``_store``, ``_index``, ``_vectors``) and ``memlib doctor``'s checks
(``_doctor``)."""
