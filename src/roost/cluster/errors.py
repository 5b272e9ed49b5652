"""The cluster's failures, neutral as the core's: adapters map them to protocol codes."""

from __future__ import annotations


class ClusterError(Exception):
    """A cluster operation failed; the text says why, for the client and the log."""


class CoordinatorUnavailable(ClusterError):
    """etcd could not be reached: definition changes fail with this, messages keep moving."""
