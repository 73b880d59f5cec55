from __future__ import annotations

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
