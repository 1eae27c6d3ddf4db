"""extract_code: the policy's raw text -> the source to run."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from agentenv import extract_code

ADD = "def add(a, b):\n    return a + b\n"


def test_python_fence_is_extracted_without_prose() -> None:
    """A ```python block is returned without the surrounding prose."""
    text = f"Here is my solution:\n```python\n{ADD}```\nIt adds the numbers."
    assert extract_code(text) == ADD


def test_py_bare_and_tilde_fences_are_recognised() -> None:
    """```py, bare ``` and ~~~ fences all work."""
    for fence in ("```py", "```", "~~~", "~~~python", "```python3"):
        close = fence[:3]
        assert extract_code(f"{fence}\n{ADD}{close}\n") == ADD


def test_block_defining_the_entry_point_wins_over_others() -> None:
    """With several blocks, the one that defines the entry point is chosen."""
    text = (f"First a helper:\n```python\ndef helper():\n    return 1\n```\n"
            f"Then:\n```python\n{ADD}```\nUsage:\n```python\nprint(add(1, 2))\n```\n")
    assert extract_code(text, entry_point="add") == ADD


def test_later_block_wins_a_tie() -> None:
    """When two blocks both define the entry point, the last (the revised one) is taken."""
    first = "def add(a, b):\n    return a - b\n"
    text = f"```python\n{first}```\nOops, fixed:\n```python\n{ADD}```"
    assert extract_code(text, entry_point="add") == ADD


def test_shell_and_output_blocks_are_ignored() -> None:
    """Blocks tagged bash or output are never taken as the solution."""
    text = f"```bash\npip install foo\n```\n```python\n{ADD}```\n```output\n5\n```"
    assert extract_code(text, entry_point="add") == ADD


def test_unclosed_fence_runs_to_the_end() -> None:
    """A block whose closing fence never came (truncated generation) is still used."""
    assert extract_code(f"```python\n{ADD}") == ADD


def test_unfenced_code_is_used_when_it_parses() -> None:
    """Plain code with no fence is returned as is."""
    assert extract_code(ADD) == ADD


def test_prose_around_unfenced_code_is_trimmed() -> None:
    """Leading and trailing prose lines around unfenced code are dropped."""
    text = f"Sure, here you go:\n{ADD}This returns the sum."
    assert extract_code(text, "add") == ADD


def test_prose_without_code_gives_empty_string() -> None:
    """Text that is not Python yields "" (the format gate then gives reward 0)."""
    assert extract_code("I am not sure how to solve this, sorry!") == ""
    assert extract_code("") == ""
    assert extract_code("   \n  ") == ""


def test_non_string_input_gives_empty_string() -> None:
    """None or other objects never raise."""
    assert extract_code(None) == ""
    assert extract_code(42) == ""


def test_windows_newlines_are_normalised() -> None:
    """CRLF text extracts the same code."""
    assert extract_code("```python\r\n" + ADD.replace("\n", "\r\n") + "```") == ADD


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_extract_code_never_raises_on_arbitrary_text(text: str) -> None:
    """Any text gives a string back, never an exception."""
    assert isinstance(extract_code(text), str)


fragments = st.sampled_from(["```", "```python", "~~~", "```py", "\n", "def add(a, b):",
                             "    return a + b", "prose here", "``", "(", "'''", "\t", "class X:"])


@settings(max_examples=300, deadline=None)
@given(st.lists(fragments, max_size=30), st.sampled_from([None, "add", "X"]))
def test_extract_code_never_raises_on_fence_soup(parts: list[str], entry: str | None) -> None:
    """Adversarial mixes of fences and code fragments still give a string."""
    assert isinstance(extract_code("\n".join(parts), entry), str)
