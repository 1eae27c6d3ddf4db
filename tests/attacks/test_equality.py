"""Python equality: values cross to the trusted side as plain data, so a lying ``__eq__``, a
subclass or a spoofed ``__class__`` compares as its content, never as whatever it claims."""

from __future__ import annotations

import pytest
from support.attacks import (
    ADD_LOOP,
    ADD_MULTI,
    SECRET_CHECKS,
    Attack,
    Case,
    attack,
    attack_scores_only_honest_work_and_leaves_nothing_behind,
    judge_attack_scores_only_honest_work_and_leaves_nothing_behind,
    judge_case,
)

from agentenv.sandbox import SandboxPool

ATTACKS = [
    # --- impostor values -------------------------------------------------------------
    attack("always_equal_object", """
class AlwaysEqual:
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    __hash__ = object.__hash__
def add(a, b):
    return AlwaysEqual()
"""),
    # A subclass crosses as its base type's content: Liar(0) is the int 0 on the trusted side,
    # so it earns what ``return 0`` earns (the two checks whose answer is 0), its __eq__ nothing.
    attack("always_equal_int_subclass", """
class Liar(int):
    def __eq__(self, other): return True
    __hash__ = int.__hash__
def add(a, b):
    return Liar(-99)  # compared by its int value, which no check expects
"""),
    attack("always_equal_str_subclass", """
class Liar(str):
    def __eq__(self, other): return True
    __hash__ = str.__hash__
def secret(i):
    return Liar('x')
""", checks=tuple(SECRET_CHECKS)),
    attack("class_spoofing_object", """
class Spoof:
    @property
    def __class__(self): return int
    def __eq__(self, other): return True
def add(a, b):
    return Spoof()
"""),
]


@pytest.mark.parametrize("case", ATTACKS, ids=lambda a: a.name)
def test_attack_scores_only_honest_work_and_leaves_nothing_behind(
        case: Attack, pool_with_secret: SandboxPool, listener: tuple[int, list[bytes]]) -> None:
    """Each attack scores its honest fraction and leaves nothing behind (see the helper)."""
    attack_scores_only_honest_work_and_leaves_nothing_behind(case, pool_with_secret, listener)


JUDGE_ATTACKS = [
    # --- answers that are not plain data ---------------------------------------------------
    judge_case("always_equal_object_to_the_judge", r"""
class AlwaysEqual:
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    def __bool__(self): return True
    __hash__ = object.__hash__
def add(a, b):
    return AlwaysEqual()
""", (ADD_LOOP, ADD_MULTI)),
    judge_case("int_subclass_liar_to_the_judge", r"""
class Liar(int):
    def __eq__(self, other): return True
    __hash__ = int.__hash__
def add(a, b):
    return Liar(a + b + 1)
""", (ADD_LOOP, ADD_MULTI)),
    judge_case("class_spoofing_object_to_the_judge", r"""
class Spoof:
    @property
    def __class__(self): return int
    def __eq__(self, other): return True
def add(a, b):
    return Spoof()
""", (ADD_LOOP, ADD_MULTI)),
]


@pytest.mark.parametrize("attack", JUDGE_ATTACKS, ids=lambda a: a.name)
def test_judge_attack_scores_only_honest_work_and_leaves_nothing_behind(
        attack: Case, pool_of_two: SandboxPool) -> None:
    """Each judged attack scores its honest fraction and leaves nothing behind (see the helper)."""
    judge_attack_scores_only_honest_work_and_leaves_nothing_behind(attack, pool_of_two)
