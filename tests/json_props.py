"""Shared hypothesis strategies and the no-fabrication check for truncated-JSON repair.

Used by the guard tests (a few hundred examples) and the slow fuzz run (10,000).
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(10**15), 10**15)
    | st.sampled_from([10**400, -(10**400)])  # exact integers past the float range
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10)
)
values = st.recursive(
    scalars,
    lambda kids: (
        st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=6), kids, max_size=4)
    ),
    max_leaves=16,
)
objects = st.dictionaries(st.text(max_size=6), values, max_size=6)


def is_prefix_subset(got: Any, orig: Any) -> bool:
    """``got`` is ``orig`` with trailing keys/members removed, recursively at the last entry
    only; every value that survives is unchanged, type included."""
    if isinstance(orig, dict):
        if not isinstance(got, dict):
            return False
        keys = list(got)
        if keys != list(orig)[: len(keys)]:
            return False
        if any(got[k] != orig[k] or type(got[k]) is not type(orig[k]) for k in keys[:-1]):
            return False
        return not keys or is_prefix_subset(got[keys[-1]], orig[keys[-1]])
    if isinstance(orig, list):
        if not isinstance(got, list) or len(got) > len(orig):
            return False
        if got[:-1] != orig[: len(got) - 1]:
            return False
        return not got or is_prefix_subset(got[-1], orig[len(got) - 1])
    return got == orig and type(got) is type(orig)
