"""Fixtures shared by every test directory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


def _helper_modules() -> list[str]:
    """The modules under tests/ that are neither tests nor conftests (pytest rewrites
    only those two kinds' asserts on its own)."""
    here = Path(__file__).parent
    return [
        ".".join(("tests", *path.relative_to(here).with_suffix("").parts))
        for path in sorted(here.rglob("*.py"))
        if not path.name.startswith("test_") and path.name not in ("conftest.py", "__init__.py")
    ]


# so that a helper's failing assert shows its operands, as a test's does: called before
# any of them is imported (a module imported first keeps plain asserts), this file's too
pytest.register_assert_rewrite(*_helper_modules())

from hypothesis import settings  # noqa: E402

from tests.support import SLOW_SYNC_MS, RoostProcess, running  # noqa: E402

# Property tests check results, not speed: on a loaded 2-core CI box one example can take
# longer than Hypothesis's 200 ms default deadline, which then fails a correct codec.
settings.register_profile("roost", deadline=None)
settings.load_profile("roost")


@pytest.fixture(scope="session")
def roost(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RoostProcess]:
    """One broker for the tests that only need a broker; each test uses its own names."""
    server = RoostProcess(tmp_path_factory.mktemp("roost-data")).start()
    yield server
    code = server.stop()
    assert code == 0, f"graceful shutdown failed ({code}):\n{server.log}"
    assert "Traceback" not in server.log, server.log


@pytest.fixture
def fresh_roost(tmp_path: Path) -> Iterator[RoostProcess]:
    """A broker of the test's own, for tests that restart it or check its log."""
    server = RoostProcess(tmp_path / "data").start()
    yield server
    server.kill()
    assert "Traceback" not in server.log, server.log


@pytest.fixture
def slow_sync(tmp_path: Path) -> Iterator[RoostProcess]:
    """A broker that fsyncs only every SLOW_SYNC_MS (``--fsync interval``): whatever must
    wait for the disk visibly waits for that timer."""
    yield from running(
        RoostProcess(
            tmp_path / "data", "--fsync", "interval", "--fsync-interval-ms", str(SLOW_SYNC_MS)
        )
    )


@pytest.fixture
def qname(request: pytest.FixtureRequest) -> str:
    """A queue name unique to the test."""
    return "q." + request.node.name.replace("[", ".").replace("]", "")
