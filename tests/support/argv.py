"""Command lines the tests give :func:`offline_gitd.cli.main`, built in one place.

Many tests train a tiny online DQN on CartPole with the Python loop (the loop whose every step the
rundir, progress and evaluation code sees) and differ only in sizes and outputs; each names just
the options it sets, so what a test trains stays visible in the test.
"""

from __future__ import annotations


def flags(**options: object) -> list[str]:
    """``--name value`` for each option, in the order given: an underscore in a name is a hyphen on
    the command line (``mlp_hidden="8"`` is ``--mlp-hidden 8``); ``True`` is a bare switch."""
    argv: list[str] = []
    for name, value in options.items():
        flag = f"--{name.replace('_', '-')}"
        argv += [flag] if value is True else [flag, str(value)]
    return argv


def online_cartpole(*extra: str, **options: object) -> list[str]:
    """``online dqn --env CartPole-v1 --loop python``, then ``options`` as flags, then ``extra``
    verbatim (``--out DIR``, ``--no-progress``...)."""
    return ["online", "dqn", "--env", "CartPole-v1", "--loop", "python", *flags(**options), *extra]
