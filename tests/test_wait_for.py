"""tests/helpers/wait.py: the value a wait returns, and what its timeout says."""

from __future__ import annotations

import pytest

from tests.helpers.wait import wait_for


def test_the_first_true_value_is_returned():
    answers = iter([None, 0, [], "ready"])
    assert wait_for(lambda: next(answers), 5, "an answer", every=0) == "ready"


def test_a_timeout_says_what_was_awaited_and_the_last_state():
    seen = []
    with pytest.raises(TimeoutError, match=r"after 0\.05 s: the job ended: \[.*RUNNING"):
        wait_for(lambda: seen.append("RUNNING"), 0.05, lambda: f"the job ended: {seen}",
                 every=0.01)
    assert len(seen) >= 2  # asked again until the time was up


def test_a_check_may_stop_the_wait_at_once():
    def exited() -> bool:
        raise AssertionError("the server exited")

    with pytest.raises(AssertionError, match="exited"):
        wait_for(exited, 60, "the server answering")
