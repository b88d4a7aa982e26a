"""The device-side shell scripts of provisioning, the argv that runs them, and readers of
what they print.

Constant text: every path reaches a script as one quoted argv element (`script_argv`), never
pasted into it. Each runs a fixed number of processes (no per-file process), because a
process start on a device shell costs milliseconds. Output is split into `@@name` sections.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from harness.errors import ProvisionError
from harness.provision.manifest import Manifest


def script_argv(script: str, args: Sequence[str]) -> list[str]:
    """`sh -c SCRIPT sh ARGS...`: the script sees ARGS as $1..., each one whole."""
    return ["sh", "-c", script, "sh", *args]


# args: work dir, journal path, then (to prepare a push in the same round trip) run dir,
# stale-run parent, manifests dir and the folders to create under the run dir. Manifests are
# one line each: `grep -H ''` prints path:json. Prints the SoC model (if the device has
# getprop) and `df -k` of the work dir; "@@prepared" unless a folder could not be made.
# A program runs only where there is something for it (each start costs a device ~1-5 ms; a
# first push to an empty work dir starts 3 instead of 7).
PROBE_SCRIPT = r"""
W=$1; J=$2; R=$3; P=$4; MD=$5; shift 5
if [ -n "$R" ]; then
  [ -d "$P" ] && find "$P" -mindepth 1 -maxdepth 1 -mmin +120 -exec rm -rf {} + 2>/dev/null
  mkdir -p "$R" "$MD" "$@" && echo @@prepared
  echo @@soc; getprop ro.soc.model 2>/dev/null
  echo @@df; df -k "$W" 2>/dev/null
fi
echo @@manifests; set -- "$W"/manifests/*/*.json; [ -e "$1" ] && grep -H '' "$@" 2>/dev/null
echo @@journal; [ -e "$J" ] && cat "$J" 2>/dev/null
echo @@files; { [ -d "$W/models" ] || [ -d "$W/runtimes" ]; } &&
  find "$W/models" "$W/runtimes" -type f -exec stat -c '%i %s %Y %a %n' {} + 2>/dev/null
echo @@end
"""

# args: run dir, stale-run parent, work dir, then folders to create. Prints the SoC model
# (if the device has getprop) and `df -k` of the work dir.
PREPARE_SCRIPT = r"""
R=$1; P=$2; W=$3; shift 3
find "$P" -mindepth 1 -maxdepth 1 -mmin +120 -exec rm -rf {} + 2>/dev/null
mkdir -p "$R" "$@" || exit 1
echo @@soc; getprop ro.soc.model 2>/dev/null
echo @@df; df -k "$W" 2>/dev/null
echo @@end
"""

# Names reach the scripts only as argv elements (each one whole: the shell never word-splits
# "$@") and counts (length-delimited groups of them); they are never read back with `read`,
# which strips blanks at the ends, nor printed with `echo`, which mksh and dash let expand
# backslashes. Output that names a file is printf'd with the name at the line's end (export
# names hold no control characters: harness.provision.artifacts); output about the arguments
# comes in argument order, without the names. Runs in Android's mksh + toybox and in dash.

# args: verify mode, set dir, run dir, journal, SIZES and SHAS (one per line, in the order of
# the paths), a partial file to discard first (or ""), "./"+rel paths (never an option, nor
# "-" for stdin)... Checks what arrived in the run dir, places it with one `cp -al`, journals
# it. Nothing but the listed, verified files can be placed. A fixed number of processes and
# no per-file shell loop (each line a shell loop writes costs a pipe write on the device):
# sizes are compared as one string; awk pairs each stat line with its sha, appends the
# journal ("sha inode size mtime ./rel") and prints "@inode mtime" per path, in order.
PLACE_SCRIPT = r"""
V=$1; D=$2; R=$3; J=$4; SIZES=$5; SHAS=$6; X=$7; shift 7
cd "$R" || { echo "BAD run folder missing"; exit 1; }
[ -n "$X" ] && rm -f -- "$X"
n=$(find . -type f | wc -l)
[ "$n" -eq $# ] || { echo "BAD the run folder holds $n files, $# expected"; exit 1; }
bad() {  # $1: what differs; GOT/WANT: one line per path. Names the first such file, drops it.
  i=0; for rel in "$@"; do i=$((i + 1))
    g=$(printf '%s\n' "$GOT" | sed -n "${i}p"); w=$(printf '%s\n' "$WANT" | sed -n "${i}p")
    [ "$g" = "$w" ] || { printf 'BAD %s %s: %s, want %s\n' "$rel" "$K" "${g:-missing}" "$w"; rm -f -- "$rel"; exit 1; }
  done
  echo "BAD $K differs"; exit 1
}
GOT=$(stat -c %s -- "$@" 2>/dev/null)
[ "$GOT" = "$SIZES" ] || { WANT=$SIZES K=size; bad "$@"; }
if [ "$V" = sha256 ]; then
  GOT=$(sha256sum -- "$@" | awk '{ sub(/^\\/, "", $1); print $1 }')
  [ "$GOT" = "$SHAS" ] || { WANT=$SHAS K=sha256; bad "$@"; }
fi
mkdir -p "$D" && cp -alf -- "$R/." "$D/" || { echo "BAD cp -al into the set failed"; exit 1; }
cd "$D" || exit 1
stat -c '%i %s %Y %n' -- "$@" | SHAS=$SHAS J=$J awk '
  BEGIN { n = split(ENVIRON["SHAS"], sha, "\n"); j = ENVIRON["J"] }
  { print sha[NR] " " $0 >> j; print "@" $1 " " $3 }'
find "$R" -type f -exec rm -f {} + 2>/dev/null
echo @@placed
"""

# args: set dir, run dir, journal, its journal lines (one per file; not "LINES": mksh keeps that one
# an integer), "./"+rel paths...
# PLACE_SCRIPT for a batch the caller already checked (sizes and stamps over the file
# protocol; the run dir holds exactly that batch): hard-links it into the set, journals it,
# empties the run dir: two processes, not nine (a device's process start costs ~1-5 ms).
PLACE_CHECKED_SCRIPT = r"""
D=$1; R=$2; J=$3; JL=$4; shift 4
{ [ -d "$D" ] || mkdir -p "$D"; } && cp -alf -- "$R/." "$D/" || { echo "BAD cp -al into the set failed"; exit 1; }
printf '%s\n' "$JL" >> "$J" || { echo "BAD cannot write the journal"; exit 1; }
cd "$R" && rm -f -- "$@"
echo @@placed
"""

# args: folder to keep them in, set dir, N, then N (source, saved name) pairs, then stale rels
# to clear. Run only when a sync reshapes its set, before anything is placed. Keeps a hard
# link (a copy where links fail) to contents that move to another name of the set while their
# own name gets new content or is cleared; then clears stale names in the way of the new tree
# (a file where a folder goes, or a folder where a file goes). The keep folder is
# "<run dir>.src", removed with the run dir.
MAKE_ROOM_SCRIPT = r"""
S=$1; D=$2; N=$3; shift 3
mkdir -p "$S" || { echo "FAIL cannot make $S"; exit 1; }
while [ "$N" -gt 0 ]; do
  ln -f -- "$1" "$2" 2>/dev/null || cp -p -- "$1" "$2" || { printf 'FAIL save %s\n' "$1"; exit 1; }
  shift 2; N=$((N - 1))
done
if [ $# -gt 0 ]; then
  cd "$D" || { echo "FAIL cannot enter the set folder"; exit 1; }
  for rel in "$@"; do rm -rf -- "./$rel" || { printf 'FAIL clear %s\n' "$rel"; exit 1; }; done
fi
echo @@room
"""

# args: set dir, manifests dir, manifest path, MANIFEST (json or ""), journal, run dir,
# FLAGS, NL, NC, then NL pairs (source path, rel), NC pairs (octal mode, rel), then stale rels.
# With "p" in FLAGS, first places the run dir's files in the set, for the push's last batch:
# the caller checked their sizes and read their stamps over the file protocol (the run dir
# holds exactly that batch: PLACE_SCRIPT emptied it after each earlier one), so a first push
# costs one device command after its last byte, not two. A set folder that does not exist yet
# is the run dir renamed (one process, the whole set appears at once); else hard links, as
# PLACE_SCRIPT makes. Then links contents found elsewhere on the device (possibly a file of
# this set about to go: links come first), adds permission bits, removes files the set no
# longer has and writes the manifest (tmp + rename). "e" in FLAGS: remove empty folders
# (left out only for a set folder that held no file before); "r": print the stat of every
# file of the set (the caller reads them over the file protocol otherwise). A program runs
# only where there is work for it.
COMMIT_SCRIPT = r"""
D=$1; MD=$2; M=$3; MANIFEST=$4; J=$5; R=$6; FL=$7; NL=$8; NC=$9; shift 9
{ [ -d "$MD" ] && [ -d "${D%/*}" ]; } || mkdir -p "$MD" "${D%/*}" || { echo "FAIL cannot make $MD"; exit 1; }
case "$FL" in *p*)
  if [ -d "$D" ]; then cp -alf -- "$R/." "$D/"; else mv -- "$R" "$D"; fi || { echo "FAIL placing the pushed files"; exit 1; } ;;
esac
{ [ -d "$D" ] || mkdir -p "$D"; } && cd "$D" || { echo "FAIL cannot enter the set folder"; exit 1; }
while [ "$NL" -gt 0 ]; do
  src=$1; rel=$2; shift 2; NL=$((NL - 1))
  case "$rel" in */*) [ -d "./${rel%/*}" ] || mkdir -p "./${rel%/*}" ;; esac
  ln -f -- "$src" "./$rel" 2>/dev/null || { cp -p -- "$src" "./$rel.cp$$" && mv -f -- "./$rel.cp$$" "./$rel"; } \
    || { printf 'FAIL link %s\n' "$rel"; exit 1; }
done
while [ "$NC" -gt 0 ]; do
  chmod "$1" "./$2" || { printf 'FAIL chmod %s\n' "$2"; exit 1; }
  shift 2; NC=$((NC - 1))
done
for rel in "$@"; do rm -f -- "./$rel"; done
# -delete, not -exec rmdir {} +: a folder emptied by removing its empty child goes too (a/b/c).
case "$FL" in *e*) find . -depth -mindepth 1 -type d -empty -delete 2>/dev/null ;; esac
case "$FL" in *r*) echo @@stat; find "$D" -type f -exec stat -c '%i %s %Y %a %n' {} + 2>/dev/null ;; esac
if [ -n "$MANIFEST" ]; then
  printf '%s\n' "$MANIFEST" > "$M.tmp$$" && mv -f "$M.tmp$$" "$M" &&
    { { [ ! -e "$J" ] && [ ! -e "$R" ] && [ ! -e "$R.src" ]; } || rm -rf "$J" "$R" "$R.src"; } && echo @@published
fi
"""

# args: tmp manifest, manifest, journal, run dir
PUBLISH_SCRIPT = r"""
mv -f "$1" "$2" && rm -rf "$3" "$4" "$4.src"
"""

# args: manifest, its text, journal, run dir
PUBLISH_INLINE_SCRIPT = r"""
mkdir -p "${1%/*}" && printf '%s\n' "$2" > "$1.tmp$$" && mv -f "$1.tmp$$" "$1" && rm -rf "$3" "$4" "$4.src"
"""

# args: work dir. What `harness status` reads: every manifest, the resume journals, the stat
# of every provisioned file and of partial pushes under .incoming.
# The runtimes' manifests only: the load preflight's QAIRT of a device (provision/preflight.py).
RUNTIME_MANIFESTS_SCRIPT = r"""
grep -H '' "$1"/manifests/runtimes/*.json 2>/dev/null
true
"""

STATUS_SCRIPT = r"""
W=$1
echo @@manifests; grep -H '' "$W"/manifests/*/*.json 2>/dev/null
echo @@journals; ls "$W"/manifests/*/*.journal 2>/dev/null
echo @@files; find "$W/models" "$W/runtimes" -type f -exec stat -c '%i %s %Y %a %n' {} + 2>/dev/null
echo @@incoming; find "$W/.incoming" -type f -exec stat -c '%i %s %Y %a %n' {} + 2>/dev/null
echo @@end
"""


# ---- reading what they print ---------------------------------------------------------------

@dataclass(frozen=True)
class RemoteStatLine:
    inode: int
    size: int
    mtime: int
    mode: int
    path: str


def parse_stat_lines(lines: Sequence[str]) -> list[RemoteStatLine]:
    out = []
    for line in lines:
        parts = line.split(" ", 4)
        if len(parts) != 5 or not all(p.isdigit() for p in parts[:3]):
            continue
        try:
            out.append(RemoteStatLine(int(parts[0]), int(parts[1]), int(parts[2]), int(parts[3], 8), parts[4]))
        except ValueError:
            continue
    return out


def split_sections(text: str) -> dict[str, list[str]]:
    """`@@name` marker lines split a script's output into sections."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.split("\n"):  # not splitlines(): a name may hold U+2028, U+0085...
        if line.startswith("@@"):
            current = sections.setdefault(line[2:].strip(), [])
        elif current is not None:
            current.append(line)
    return sections


def parse_manifest_lines(lines: Sequence[str], where: str) -> list[tuple[str, Manifest | ProvisionError]]:
    """`grep -H '' manifests/*/*.json` output (one "path:{json}" line each), parsed; a damaged
    manifest comes back as its error so each caller decides what it means."""
    out: list[tuple[str, Manifest | ProvisionError]] = []
    for line in lines:
        path, sep, text = line.partition(":{")
        if not sep:
            continue
        try:
            out.append((path, Manifest.from_json("{" + text, f"{where}:{path}")))
        except ProvisionError as exc:
            out.append((path, exc))
    return out


__all__ = [
    "COMMIT_SCRIPT", "PLACE_CHECKED_SCRIPT", "PLACE_SCRIPT", "PREPARE_SCRIPT", "PROBE_SCRIPT", "PUBLISH_INLINE_SCRIPT", "PUBLISH_SCRIPT",
    "MAKE_ROOM_SCRIPT", "RUNTIME_MANIFESTS_SCRIPT", "STATUS_SCRIPT",
    "RemoteStatLine", "parse_manifest_lines", "parse_stat_lines", "script_argv", "split_sections",
]
