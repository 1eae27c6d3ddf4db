"""Logging: silent until configured, structured once configured, never on stdout."""

from __future__ import annotations

import subprocess
import sys

from structlog.testing import capture_logs

from agentenv.log import get_logger


def test_events_are_captured_as_structured_data_when_structlog_is_configured() -> None:
    """capture_logs sees the event name, level and bound fields."""
    log = get_logger("agentenv.test").bind(turn=2)
    with capture_logs() as logs:
        log.warning("transition", from_state="A", to_state="B")
    assert logs == [{"event": "transition", "log_level": "warning", "turn": 2,
                     "from_state": "A", "to_state": "B"}]


def test_library_prints_nothing_when_logging_is_not_configured() -> None:
    """A user who configured nothing sees no agentenv output on stdout or stderr."""
    code = ("from agentenv.log import get_logger\n"
            "get_logger('agentenv.x').warning('tokenizer_fallback', detail='offline')\n"
            "print('done')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0
    assert proc.stdout == "done\n" and proc.stderr == ""


def test_configure_logging_writes_to_stderr_not_stdout() -> None:
    """The CLI's setup renders events on stderr, keeping stdout for results."""
    code = ("from agentenv.log import configure_logging, get_logger\n"
            "configure_logging('info', json=True)\n"
            "get_logger('agentenv.x').info('hello', n=1)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.stdout == ""
    assert '"event": "hello"' in proc.stderr and '"n": 1' in proc.stderr


def test_configured_logging_follows_a_swapped_stderr_and_never_writes_to_a_closed_one() -> None:
    """After configure_logging, replacing and closing sys.stderr does not break later events."""
    import io
    import sys

    from agentenv.log import configure_logging

    original = sys.stderr
    first, second = io.StringIO(), io.StringIO()
    try:
        sys.stderr = first
        configure_logging("info", json=True)
        get_logger("agentenv.x").info("one")
        first.close()
        sys.stderr = second
        get_logger("agentenv.x").info("two")
    finally:
        sys.stderr = original
    assert '"event": "two"' in second.getvalue()


def test_importing_the_library_loads_neither_structlog_nor_rich() -> None:
    """Logging and terminal output cost nothing until an application configures or uses them."""
    code = ("import sys\n"
            "from agentenv import CodingEnv, MultiTurnCodingEnv, load_tasks, run_tests\n"
            "import agentenv.integrations.trl\n"
            "print(sorted(m for m in ('structlog', 'rich') if m in sys.modules))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "[]\n"


def test_events_reach_structlog_configured_after_the_logger_was_made() -> None:
    """A logger created before structlog was imported still routes to it once configured."""
    code = ("from agentenv.log import get_logger\n"
            "log = get_logger('agentenv.x')\n"
            "import structlog\n"
            "from structlog.testing import capture_logs\n"
            "with capture_logs() as logs:\n"
            "    log.warning('late', n=2)\n"
            "print(logs)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "'event': 'late'" in proc.stdout and "'n': 2" in proc.stdout
