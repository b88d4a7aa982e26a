"""build_shell_command / quote_argv: every argument reaches the program literally."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from harness.transport import build_shell_command, env_prefix, quote_argv

NASTY = ["a b", "x;y", "'; rm -rf /data #", "$(id)", "`id`", '"q"', "back\\slash", "new\nline", "*", "", "-n"]


def _run_sh(command: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["sh", "-c", command], capture_output=True, text=True, cwd=cwd, timeout=30)


def test_quote_argv_round_trips_through_sh():
    # printf prints each argument between markers: the shell must see exactly these argv.
    cmd = quote_argv(["printf", "[%s]", *NASTY])
    out = _run_sh(cmd).stdout
    assert out == "".join(f"[{a}]" for a in NASTY)


def test_quote_argv_rejects_strings_and_empty():
    with pytest.raises(TypeError, match="argv lists"):
        quote_argv("ls -l")
    with pytest.raises(TypeError):
        quote_argv(b"ls")
    with pytest.raises(ValueError, match="empty"):
        quote_argv([])


def test_quote_argv_stringifies_numbers_and_paths():
    assert quote_argv(["kill", "-9", 123]) == "kill -9 123"
    assert quote_argv([Path("/data/local/tmp/a b")]) == "'/data/local/tmp/a b'"


def test_injection_stays_literal(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("x")
    cmd = build_shell_command(["echo", f"; rm -f {victim}", f"'; rm -f {victim} #"])
    res = _run_sh(cmd)
    assert res.returncode == 0 and victim.exists()
    assert res.stdout == f"; rm -f {victim} '; rm -f {victim} #\n"


def test_cwd_env_and_stdin(tmp_path):
    odd = tmp_path / "dir with; semicolon"
    odd.mkdir()
    cmd = build_shell_command(["sh", "-c", 'pwd; printf "%s|%s" "$A" "$B"; cat'], cwd=str(odd),
                              env={"A": "1 2", "B": "$(id);'"})
    res = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, input="stdin must not be read",
                         timeout=30)
    assert res.stdout == f"{odd}\n1 2|$(id);'"  # `cat` read /dev/null, not our input


def test_cwd_failure_stops_the_command(tmp_path):
    marker = tmp_path / "ran"
    cmd = build_shell_command(["touch", str(marker)], cwd=str(tmp_path / "missing"))
    assert _run_sh(cmd).returncode != 0 and not marker.exists()


@pytest.mark.parametrize("name", ["1A", "A-B", "A B", "A;B", "", "A=B", "$A"])
def test_env_names_validated(name):
    with pytest.raises(ValueError, match="invalid environment variable name"):
        env_prefix({name: "x"})
    with pytest.raises(ValueError):
        build_shell_command(["true"], env={name: "x"})


def test_env_prefix_quotes_values():
    assert env_prefix(None) == "" and env_prefix({}) == ""
    assert env_prefix({"LD_LIBRARY_PATH": "/a b;c", "_X1": "y"}) == "LD_LIBRARY_PATH='/a b;c' _X1=y "


@pytest.mark.parametrize("env", [None, {"GREETING": "hi there"}])
def test_pid_file_names_the_program_and_goes_when_it_ends(tmp_path, env):
    """With a pid file the program execs in place: the file holds the program's own pid and
    start time (its /proc stat line), and the shell removes the file when the program ends."""
    from harness.transport import parse_stat_line

    pid_file = tmp_path / "pid file"
    own = tmp_path / "own"
    seen = tmp_path / "seen"
    script = f'echo $$ > "{own}"; cat "{pid_file}" > "{seen}"; echo "$GREETING"'
    cmd = build_shell_command(["sh", "-c", script], pid_file=str(pid_file), env=env, cwd=str(tmp_path))
    assert "exec" in cmd
    res = _run_sh(cmd)
    assert res.returncode == 0
    proc = parse_stat_line(seen.read_text())
    assert proc is not None and str(proc.pid) == own.read_text().strip() and proc.start > 0
    assert not pid_file.exists()
    assert res.stdout == ("hi there\n" if env else "\n")


def test_pid_file_command_stays_in_a_failed_cwd(tmp_path):
    cmd = build_shell_command(["touch", "ran"], pid_file=str(tmp_path / "p"), cwd=str(tmp_path / "absent"))
    assert _run_sh(cmd).returncode != 0 and not (tmp_path / "ran").exists() and not (tmp_path / "p").exists()


def test_pid_file_keeps_exit_code(tmp_path):
    cmd = build_shell_command(["sh", "-c", "exit 7"], pid_file=str(tmp_path / "p"))
    assert _run_sh(cmd).returncode == 7
    killed = build_shell_command(["sh", "-c", "kill -9 $$"], pid_file=str(tmp_path / "p"))
    assert _run_sh(killed).returncode == 137  # as the device shell reports a signal: 128+N


def test_stdin_null_can_be_disabled():
    assert not build_shell_command(["cat"], stdin_null=False).endswith("< /dev/null")
    assert build_shell_command(["cat"]).endswith("< /dev/null")
