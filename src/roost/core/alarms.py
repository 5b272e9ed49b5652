"""Resource alarms: memory high watermark and disk free limit, as RabbitMQ has them.

``ResourceAlarms`` keeps the limits, the last figures measured and the set of alarms in
effect ("memory", "disk"). Someone calls ``check()`` on a timer (the server, about once
a second); listeners (the protocol adapters) are told whenever the set changes and
decide what blocking means for their protocol. The store can raise the disk alarm on
its own (``store_full``) when a write fails with ENOSPC; that part clears when a write
succeeds again.

Limits are given as RabbitMQ writes them: the memory watermark is a fraction of the
machine's RAM (``0.4``, RabbitMQ's default) or an absolute size (``512MiB``); the disk
free limit an absolute size (``50MB``, the default) or ``mem_relative:1.0`` (that many
times the RAM). Units: ``k``/``KiB`` = 1024, ``kB`` = 1000, and so on up to T.
"""

from __future__ import annotations

import ctypes
import logging
import os
import re
import resource
from collections.abc import Callable

log = logging.getLogger("roost.alarms")

MEMORY = "memory"
DISK = "disk"

DEFAULT_MEMORY_WATERMARK = "0.4"
DEFAULT_DISK_FREE_LIMIT = "50MB"
DEFAULT_PAGING_RATIO = 0.5

_UNITS = {
    "": 1,
    "b": 1,
    "k": 1024,
    "kib": 1024,
    "kb": 1000,
    "m": 1024**2,
    "mib": 1024**2,
    "mb": 1000**2,
    "g": 1024**3,
    "gib": 1024**3,
    "gb": 1000**3,
    "t": 1024**4,
    "tib": 1024**4,
    "tb": 1000**4,
}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")

Listener = Callable[[frozenset[str]], None]


def parse_size(text: str) -> int:
    """``512MiB`` -> 536870912; a bare number is bytes. ValueError when unreadable."""
    match = _SIZE.match(text)
    unit = match.group(2).lower() if match else ""
    if match is None or unit not in _UNITS:
        raise ValueError(f"'{text}' is not a size (e.g. 50MB, 512MiB, 1073741824)")
    return int(float(match.group(1)) * _UNITS[unit])


def memory_limit(spec: str, total: int) -> int:
    """The memory watermark in bytes: a fraction of ``total`` (a number below 1, or
    ``relative:F``), else an absolute size (``absolute:512MiB`` or ``512MiB``)."""
    text = spec.strip()
    kind, _, value = text.partition(":")
    if value and kind == "relative":
        return _fraction(value, total)
    if value and kind == "absolute":
        return parse_size(value)
    try:
        number = float(text)
    except ValueError:
        return parse_size(text)
    if number <= 1:  # "0.4", "1.0": a fraction, as RabbitMQ reads them
        return _fraction(text, total)
    return int(number)


def disk_limit(spec: str, total_memory: int) -> int:
    """The disk free limit in bytes: ``mem_relative:F`` or an absolute size."""
    text = spec.strip()
    kind, _, value = text.partition(":")
    if value and kind == "mem_relative":
        return int(float(value) * total_memory)
    return parse_size(text)


def _fraction(text: str, total: int) -> int:
    fraction = float(text)
    if not 0 <= fraction <= 1:
        raise ValueError(f"memory watermark fraction {text} is not between 0 and 1")
    return int(fraction * total)


# -- probes: cheap enough to run every second -----------------------------------------


def total_memory() -> int:
    """Physical RAM, or the cgroup's memory limit when that is lower (a container)."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    try:
        with open("/sys/fs/cgroup/memory.max", "rb") as fh:
            raw = fh.read().strip()
        if raw.isdigit():
            total = min(total, int(raw))
    except OSError:
        pass
    return total


def rss_bytes() -> int:
    """This process's resident set size (RabbitMQ's default memory calculation)."""
    try:
        with open("/proc/self/statm", "rb") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _glibc_malloc_trim() -> Callable[[], None] | None:
    """``malloc_trim(0)`` where the C library has it (glibc), else None."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # musl, macOS: nothing to call
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int

    def _trim() -> None:
        trim(0)

    return _trim


# glibc keeps memory that Python frees (message bodies above pymalloc's 512 bytes are
# malloc'ed) for reuse instead of returning it: after a publish storm has pushed RSS past
# the watermark and the queues have drained, RSS would stay above it and publishers would
# stay blocked for good. Trimming the heap before judging gives the freed memory back.
trim_heap = _glibc_malloc_trim()


def disk_free(path: str) -> int:
    """Bytes an unprivileged writer may still use on the file system holding ``path``."""
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


class ResourceAlarms:
    """Limits, last measurements and the alarms in effect; listeners hear of changes."""

    def __init__(
        self,
        *,
        memory_watermark: str = DEFAULT_MEMORY_WATERMARK,
        disk_free_limit: str = DEFAULT_DISK_FREE_LIMIT,
        paging_ratio: float = DEFAULT_PAGING_RATIO,
        data_dir: str = ".",
        memory_total: int | None = None,
        memory_probe: Callable[[], int] = rss_bytes,
        disk_probe: Callable[[str], int] = disk_free,
        heap_trim: Callable[[], None] | None = trim_heap,
    ) -> None:
        self.memory_total = total_memory() if memory_total is None else memory_total
        self.data_dir = data_dir
        self.memory_probe = memory_probe
        self.heap_trim = heap_trim
        self.disk_probe = disk_probe
        self.memory_watermark = memory_watermark
        self.mem_limit = memory_limit(memory_watermark, self.memory_total)
        self.disk_free_limit_spec = disk_free_limit
        self.disk_free_limit = disk_limit(disk_free_limit, self.memory_total)
        self.mem_used = 0
        self.disk_free = -1  # not measured yet
        self.store_full = False  # a store write failed with ENOSPC and was not retried yet
        # above paging_ratio x the memory watermark, queues page transient messages to disk
        # (RabbitMQ's vm_memory_high_watermark_paging_ratio)
        self.paging_ratio = paging_ratio
        self.paging = False
        # told when paging starts (True) or stops: the broker pages out what queues keep
        self._paging_listeners: dict[Callable[[bool], None], None] = {}
        self.active: frozenset[str] = frozenset()
        self._listeners: dict[Listener, None] = {}  # a set in subscription order

    # -- listeners ----------------------------------------------------------------------

    def subscribe(self, listener: Listener) -> None:
        """``listener(active)`` after every change of the set of alarms in effect."""
        self._listeners[listener] = None

    def unsubscribe(self, listener: Listener) -> None:
        self._listeners.pop(listener, None)

    def subscribe_paging(self, listener: Callable[[bool], None]) -> None:
        """``listener(paging)`` when paging transient messages to disk starts (True) or
        stops. The broker subscribes as it is built: the alarms are made before it (the
        disk store, which the broker needs, reports a full disk to them), so its
        reaction cannot be handed to their constructor."""
        self._paging_listeners[listener] = None

    # -- limits (start-up and operator calls) -------------------------------------------

    def set_memory_watermark(self, spec: str) -> None:
        self.mem_limit = memory_limit(spec, self.memory_total)
        self.memory_watermark = spec
        log.info("memory high watermark set to %s (%d bytes)", spec, self.mem_limit)
        self.check()

    def set_disk_free_limit(self, spec: str) -> None:
        self.disk_free_limit = disk_limit(spec, self.memory_total)
        self.disk_free_limit_spec = spec
        log.info("disk free limit set to %s (%d bytes)", spec, self.disk_free_limit)
        self.check()

    # -- measuring ----------------------------------------------------------------------

    def check(self) -> frozenset[str]:
        """Measure memory and disk now and update the alarms; the alarms in effect."""
        self.mem_used = self.memory_probe()
        if self.mem_used > self.mem_limit and self.heap_trim is not None:
            # only above the limit: a trim walks the heap (about a millisecond)
            self.heap_trim()
            self.mem_used = self.memory_probe()
        try:
            self.disk_free = self.disk_probe(self.data_dir)
        except OSError as exc:  # the data dir vanished: say so, keep the last figure
            log.warning("cannot measure free disk space of %s: %s", self.data_dir, exc)
        return self._update()

    def set_store_full(self, full: bool) -> None:
        """The store could not write for lack of space (True), or wrote again (False)."""
        if full != self.store_full:
            self.store_full = full
            self._update()

    def _update(self) -> frozenset[str]:
        paging = self.mem_used >= self.mem_limit * self.paging_ratio
        if paging != self.paging:
            self.paging = paging
            log.info("paging transient messages to disk %s (used %d bytes, threshold %d)",
                     "started" if paging else "stopped", self.mem_used,
                     int(self.mem_limit * self.paging_ratio))
            for told in list(self._paging_listeners):
                told(paging)
        active = set()
        if self.mem_used > self.mem_limit:
            active.add(MEMORY)
        if self.store_full or 0 <= self.disk_free < self.disk_free_limit:
            active.add(DISK)
        new = frozenset(active)
        if new != self.active:
            for name in sorted(new - self.active):
                log.warning(
                    "%s resource limit alarm set on this node (%s)", name, self._figures(name)
                )
            for name in sorted(self.active - new):
                log.warning(
                    "%s resource limit alarm cleared on this node (%s)",
                    name,
                    self._figures(name),
                )
            self.active = new
            for listener in list(self._listeners):
                try:
                    listener(new)
                except Exception:  # one broken connection must not keep others blocked
                    log.exception("alarm listener failed")
        return new

    def _figures(self, name: str) -> str:
        if name == MEMORY:
            return f"used {self.mem_used} bytes, limit {self.mem_limit}"
        full = ", a store write failed for lack of space" if self.store_full else ""
        return f"free {self.disk_free} bytes, limit {self.disk_free_limit}{full}"
