"""One public surface (memlane.surface, docs/api.md), offered by Memory and MemoryClient alike."""

from __future__ import annotations

import inspect

import pytest

from memlane import Memory
from memlane.aio import AsyncMemory, AsyncMemoryClient
from memlane.client import LOCAL_ONLY, MemoryClient
from memlane.surface import ALIASES, IN_PROCESS, SURFACE, surface_names


def test_surface_groups_do_not_overlap() -> None:
    listed = [name for names in SURFACE.values() for name in names]
    assert len(listed) == len(set(listed))
    assert not set(listed) & set(ALIASES)
    assert not (set(listed) | set(ALIASES)) & set(IN_PROCESS)


def test_every_memory_member_is_placed() -> None:
    """A new public method of Memory goes into the surface, the aliases or IN_PROCESS on purpose."""
    public = {n for n in dir(Memory) if not n.startswith("_")}
    unplaced = public - surface_names() - set(IN_PROCESS)
    assert unplaced == set(), f"place these in memlane/surface.py: {sorted(unplaced)}"
    assert not (surface_names() | set(IN_PROCESS)) - public, "stale names in memlane/surface.py"


@pytest.mark.parametrize("cls", [Memory, MemoryClient], ids=["Memory", "MemoryClient"])
def test_offers_the_whole_surface(cls: type) -> None:
    missing = sorted(n for n in surface_names() if not hasattr(cls, n))
    assert missing == [], f"{cls.__name__} lacks {missing}"
    for name in surface_names():
        member = inspect.getattr_static(cls, name)
        assert callable(member) or isinstance(member, property | classmethod), name
        doc = getattr(cls, name).__doc__ if not isinstance(member, property) else member.__doc__
        if cls is Memory and name in ALIASES:
            assert doc, f"alias {name} needs a docstring saying what it stands for"


@pytest.mark.parametrize("cls", [AsyncMemory, AsyncMemoryClient], ids=["AsyncMemory", "AsyncMemoryClient"])
def test_async_twins_offer_the_whole_surface(cls: type) -> None:
    missing = sorted(n for n in surface_names() - {"from_url", "pending_writes"} if not hasattr(cls, n))
    assert missing == [], f"{cls.__name__} lacks {missing}"


def test_the_client_leaves_out_only_in_process_members() -> None:
    assert set(LOCAL_ONLY) <= set(IN_PROCESS)
