"""The bench's stack picks every port before its servers bind them: no port twice."""

from __future__ import annotations

import itertools

import pytest

from bench import stack


def test_a_port_handed_out_is_not_handed_out_again_before_anything_binds_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    picks = itertools.chain([21_001, 21_001, 21_001], itertools.count(21_002))
    monkeypatch.setattr("bench.stack.random.randint", lambda low, high: next(picks))
    monkeypatch.setattr(stack, "bindable", lambda port, host="127.0.0.1": True)  # as if all were free
    monkeypatch.setattr(stack, "_HANDED_OUT", set())
    first = stack.free_port()
    second = stack.free_port()  # 21001 is still free to bind: nothing has bound it yet
    assert (first, second) == (21_001, 21_002)
