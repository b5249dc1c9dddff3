"""The error hierarchy (docs/reference.md#errors): every error memlib raises on purpose is
a ``RemoteMemoryError``; a caller tells "your input was wrong" from "the store is damaged"
by the subclass."""

from __future__ import annotations


class RemoteMemoryError(RuntimeError):
    """Base class: anything memlib refuses or cannot read."""


class RemoteMemoryValidationError(RemoteMemoryError):
    """Input broke a rule of the contract; nothing was written."""


class RemoteMemoryDuplicateError(RemoteMemoryValidationError):
    """A memory_id that the scope already holds (or a batch repeats)."""

    def __init__(self, memory_ids: str | list[str] | tuple[str, ...]) -> None:
        ids = (memory_ids,) if isinstance(memory_ids, str) else tuple(memory_ids)
        self.memory_ids: tuple[str, ...] = ids
        super().__init__(f"duplicate memory_id: {', '.join(ids)}")


class RemoteMemoryScopeError(RemoteMemoryError):
    """A record that belongs to another user scope was met where this scope reads."""


class RemoteMemoryCorruptionError(RemoteMemoryError):
    """Stored data that cannot be trusted: bad JSON, a bad record, a bad timestamp."""


class RemoteMemoryUnsafePathError(RemoteMemoryCorruptionError):
    """A store file or folder that memlib will not trust: a link, a FIFO, another
    account's file, or one other users may write. Nothing was read or changed."""


class RemoteMemoryStorageError(RemoteMemoryError):
    """The storage under a store failed (disk full, read-only, locked, I/O error); the
    store is left as it was before the failed write, and the message names the cause."""


class RemoteMemoryVectorModelError(RemoteMemoryError):
    """The store's vectors were made by another embedding model (or dimension); the
    message names both and the command that rebuilds them."""
