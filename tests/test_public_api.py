from __future__ import annotations

import pytest

import memlane


def test_all_is_sorted_and_importable() -> None:
    assert memlane.__all__ == sorted(memlane.__all__)
    for name in memlane.__all__:
        assert hasattr(memlane, name), name


def test_errors_form_one_tree() -> None:
    for name in memlane.__all__:
        obj = getattr(memlane, name)
        if isinstance(obj, type) and issubclass(obj, Exception):
            assert issubclass(obj, memlane.MemlaneError)
    assert issubclass(memlane.InvalidInputError, ValueError)


def test_errors_nest() -> None:
    """``except NotFoundError`` catches a missing session; a lock timeout is a MemlaneError."""
    assert issubclass(memlane.SessionNotFoundError, memlane.NotFoundError)
    assert issubclass(memlane.LockTimeoutError, memlane.MemlaneError)
    assert issubclass(memlane.LockTimeoutError, TimeoutError)
    mem = memlane.Memory.in_memory(auto_create_sessions=False, embedder="none")
    try:
        with pytest.raises(memlane.NotFoundError) as caught:
            mem.get_session("nobody")
        assert isinstance(caught.value, memlane.SessionNotFoundError)
    finally:
        mem.close()
