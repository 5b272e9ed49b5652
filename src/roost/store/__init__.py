"""Message files: the only package that reads or writes them (DESIGN.md, "Data on disk")."""
