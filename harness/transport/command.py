"""Building device shell strings. This is the only place that turns argv lists into shell
text: every piece goes through shlex.quote, so names with spaces or `;` stay one argument.
Every piece is first checked for what the link cannot carry (`check_wire_text`): a NUL ends
a C string on the device (adb's service name, sshd's exec request), and a lone surrogate has
no UTF-8 form. Both are refused before anything is sent."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence

from harness.errors import UnsendableText

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def wire_text_problem(text: str) -> str | None:
    """Why `text` cannot go to a device as is (None when it can)."""
    at = text.find("\0")
    if at >= 0:
        return f"a NUL byte at offset {at}, which ends the string on the device"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return (f"a lone surrogate U+{ord(text[exc.start]):04X} at offset {exc.start}, which has no UTF-8 form "
                "(often bytes decoded with surrogateescape)")
    return None


def check_wire_text(text: str, where: str) -> None:
    """Refuse `text` (named by `where`) when the device link cannot carry it."""
    problem = wire_text_problem(text)
    if problem is not None:
        raise UnsendableText(f"{where} holds {problem}; nothing was sent to the device. Remove it or pass "
                             "valid UTF-8 text")


def quote_argv(args: Sequence[str]) -> str:
    if isinstance(args, (str, bytes)):
        raise TypeError("device commands are argv lists, not strings: pass ['ls', '-l', path]")
    if not args:
        raise ValueError("empty command")
    words = [str(a) for a in args]
    for i, word in enumerate(words):
        if wire_text_problem(word) is not None:
            check_wire_text(word, f"argument #{i} {word[:40]!r} of the device command {words[0][:60]!r}")
    return " ".join(shlex.quote(w) for w in words)


def env_prefix(env: Mapping[str, str] | None) -> str:
    if not env:
        return ""
    parts = []
    for name, value in env.items():
        if not _ENV_NAME.match(name):
            raise ValueError(f"invalid environment variable name {name!r}")
        check_wire_text(str(value), f"environment variable {name}")
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
    """`cd CWD && K=V... argv`.

    `pid_file`: the program runs in a subshell that writes its own `/proc/self/stat` line (pid
    and start time, harness/transport/pidfiles.py) to `pid_file` and then `exec`s it, so the
    file names the program itself; the outer shell removes the file when the program ends and
    exits with its status (128+N for a signal N). A device without /proc gets an empty file.
    """
    pieces = []
    if cwd:
        check_wire_text(cwd, "the working folder (cwd)")
        pieces.append(f"cd {shlex.quote(cwd)}")
    if pid_file:
        pieces.append(f'{{ read -r _hs < /proc/self/stat || _hs=; }} 2>/dev/null && echo "$_hs" > {shlex.quote(pid_file)}')
    run = f"{env_prefix(env)}{quote_argv(args)}"
    if pid_file:
        # `exec` keeps the pid; env assignments before exec apply to the program.
        run = f"exec {run}" if not env else f"exec env {env_prefix(env)}{quote_argv(args)}"
    if stdin_null:
        run += " < /dev/null"
    pieces.append(run)
    command = " && ".join(pieces)
    if pid_file:
        # A hangup (the link's shell stream closed) must not wedge the waiting shell: mksh, the
        # Android shell, hangs up its foreground job and then sleeps with SIGCHLD blocked, a
        # zombie beside it, for good. With a trap it waits on: the program runs until it ends
        # or the harness kills it through the pid file, then the file goes and the shell exits.
        q = shlex.quote(pid_file)
        on_hangup = shlex.quote(f"rm -f {q}; exit 129")
        command = f"trap {on_hangup} HUP; ( {command} ); _hrc=$?; rm -f {q}; exit $_hrc"
    return command
