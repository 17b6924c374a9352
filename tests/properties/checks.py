"""What every property here checks of a refusal: the package's own error, with a message of one
non-empty line (the CLI prints it after ``offline_gitd: error:``)."""

from __future__ import annotations

from hypothesis import HealthCheck, settings


def assert_one_line(error: BaseException) -> None:
    """The message of ``error`` is one non-empty line: no newline or carriage return inside."""
    message = str(error)
    assert message.strip(), f"{type(error).__name__} with an empty message"
    assert "\n" not in message and "\r" not in message, f"{type(error).__name__} over several lines: {message!r}"


def share(fraction: float, suppress: tuple[HealthCheck, ...] = ()) -> settings:
    """Settings running ``fraction`` of the profile's ``max_examples``: for generators that only
    vary an input the parser reads the same way, and for examples that cost a file or a process.
    ``suppress`` adds health checks to the profile's suppressed ones."""
    return settings(
        max_examples=max(10, round(settings.default.max_examples * fraction)),
        suppress_health_check=(*settings.default.suppress_health_check, *suppress),
    )
