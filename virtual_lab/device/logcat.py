"""logcat for the virtual device: reads /data/misc/logcat.log.

Lines in the file: <epoch> <pid> <tag> <level> <message>. Supported: -d (dump and exit),
-c (clear), -s (silence all but the given filters), -v brief|threadtime|time, -t N (last N,
implies -d), filterspecs TAG[:LEVEL] and *:LEVEL; -b is accepted and ignored.
"""
import sys
import time

LOG = "/data/misc/logcat.log"
LEVELS = "VDIWEFS"


def parse(argv):
    opts = {"dump": False, "clear": False, "fmt": "threadtime", "tail": None, "specs": [], "silent": False}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "-d":
            opts["dump"] = True
        elif a == "-c":
            opts["clear"] = True
        elif a == "-s":
            opts["silent"] = True
        elif a in ("-v", "-b", "-t") or (a[:2] in ("-v", "-b", "-t") and len(a) > 2):
            val = a[2:] if len(a) > 2 else (argv[i + 1] if i + 1 < len(argv) else "")
            i += 0 if len(a) > 2 else 1
            if a.startswith("-v"):
                opts["fmt"] = val
            elif a.startswith("-t"):
                if not val.isdigit():
                    sys.exit(f"logcat: -t wants a line count, got {val!r}")
                opts["tail"], opts["dump"] = int(val), True
        elif a.startswith("-"):
            sys.exit(f"logcat: unsupported option {a} (virtual device logcat)")
        else:
            tag, _, lvl = a.partition(":")
            lvl = (lvl or "V").upper()[:1]
            if lvl not in LEVELS:
                sys.exit(f"logcat: bad level in filterspec {a!r}")
            opts["specs"].append((tag, lvl))
        i += 1
    return opts


def wanted(opts, tag, level):
    default = "S" if opts["silent"] else "V"
    need = None
    for t, lvl in opts["specs"]:
        if t == tag:
            need = lvl
        elif t == "*" and need is None:
            default = lvl
    need = need or default
    return LEVELS.index(level) >= LEVELS.index(need) and need != "S"


def fmt(opts, line):
    parts = line.rstrip("\n").split(" ", 4)
    if len(parts) < 4:
        return None
    ts, pid, tag, level = parts[:4]
    msg = parts[4] if len(parts) > 4 else ""
    level = level[:1].upper() if level else "I"
    if level not in LEVELS or not wanted(opts, tag, level):
        return None
    try:
        t = float(ts)
    except ValueError:
        return None
    stamp = time.strftime("%m-%d %H:%M:%S", time.localtime(t)) + f".{int((t % 1) * 1000):03d}"
    if opts["fmt"] == "brief":
        return f"{level}/{tag}({pid:>5}): {msg}"
    if opts["fmt"] == "time":
        return f"{stamp} {level}/{tag}({pid:>5}): {msg}"
    return f"{stamp} {pid:>5} {pid:>5} {level} {tag:<8}: {msg}"


def main():
    opts = parse(sys.argv[1:])
    if opts["clear"]:
        open(LOG, "w").close()
        return 0
    try:
        fh = open(LOG, encoding="utf-8", errors="replace")
    except FileNotFoundError:
        fh = None
    out = []
    if fh is not None:
        for line in fh:
            text = fmt(opts, line)
            if text is not None:
                out.append(text)
    if opts["tail"] is not None:
        out = out[-opts["tail"]:] if opts["tail"] else []
    for text in out:
        print(text)
    if opts["dump"]:
        return 0
    sys.stdout.flush()
    while True:  # follow, like logcat without -d
        if fh is None:
            time.sleep(0.2)
            try:
                fh = open(LOG, encoding="utf-8", errors="replace")
            except FileNotFoundError:
                continue
        line = fh.readline()
        if not line:
            time.sleep(0.1)
            continue
        text = fmt(opts, line)
        if text is not None:
            print(text, flush=True)


if __name__ == "__main__":
    sys.exit(main())
