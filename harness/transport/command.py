"""Building device shell strings. This is the only place that turns argv lists into shell
text: every piece goes through shlex.quote, so names with spaces or `;` stay one argument."""

from __future__ import annotations

import re
import shlex
from typing import Mapping, Sequence

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def quote_argv(args: Sequence[str]) -> str:
    if isinstance(args, (str, bytes)):
        raise TypeError("device commands are argv lists, not strings: pass ['ls', '-l', path]")
    if not args:
        raise ValueError("empty command")
    return " ".join(shlex.quote(str(a)) for a in args)


def env_prefix(env: Mapping[str, str] | None) -> str:
    if not env:
        return ""
    parts = []
    for name, value in env.items():
        if not _ENV_NAME.match(name):
            raise ValueError(f"invalid environment variable name {name!r}")
        parts.append(f"{name}={shlex.quote(str(value))}")
    return " ".join(parts) + " "


def build_shell_command(
    args: Sequence[str],
    *,
    cwd: str | None = None,
    env: Mapping[str, str] | None = None,
    pid_file: str | None = None,
    stdin_null: bool = True,
) -> str:
    """`cd CWD && [echo $$ > PIDFILE &&] exec K=V... argv`.

    With `pid_file`, the shell writes its own pid and then execs the program, so the pid
    in the file is the program's pid on the device: a timed-out run can be killed there.
    """
    pieces = []
    if cwd:
        pieces.append(f"cd {shlex.quote(cwd)}")
    if pid_file:
        pieces.append(f"echo $$ > {shlex.quote(pid_file)}")
    run = f"{env_prefix(env)}{quote_argv(args)}"
    if pid_file:
        # `exec` keeps the pid; env assignments before exec apply to the program.
        run = f"exec {run}" if not env else f"exec env {env_prefix(env)}{quote_argv(args)}"
    if stdin_null:
        run += " < /dev/null"
    pieces.append(run)
    return " && ".join(pieces)
