"""The synchronous-child rule, written once (:func:`tracesleuth.model.synchronous_children`)."""

import numpy as np

from tracesleuth import schema as S
from tracesleuth.model import synchronous_children

KINDS = ["server", "client", "producer", "consumer", "internal", "unspecified"]


def test_by_declaration():
    follows = [False, False, False, False, True, False]
    assert synchronous_children(KINDS, follows).tolist() == [True, True, False, False, False, True]


def test_kind_codes_give_the_same_answer_as_kind_names():
    codes = np.array([S.SPAN_KINDS.index(k) for k in KINDS], dtype=np.int8)
    follows = np.zeros(len(KINDS), dtype=bool)
    np.testing.assert_array_equal(synchronous_children(codes, follows), synchronous_children(KINDS, follows))


def test_a_child_ending_after_its_parent_is_asynchronous():
    got = synchronous_children(["client"] * 3, [False] * 3, end_ns=np.array([5, 6, 7]),
                               parent_end_ns=np.array([6, 6, 6]))
    assert got.tolist() == [True, True, False]
