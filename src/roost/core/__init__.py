"""The broker model, independent of any wire protocol."""
