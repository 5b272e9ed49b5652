"""Message files: the only package that reads or writes them (docs/store.md,
docs/architecture.md)."""
