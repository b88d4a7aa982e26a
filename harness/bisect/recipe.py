"""The export axis: the commits of the git repository that holds a plan build's `inputs`, each
re-exported through the night's export cache (harness/lab/exports), so a commit whose inputs were
built before (by a night, by an earlier bisection) is served from the cache and not built again.

A commit is read out of the repository with `git archive` into a folder of this run (the user's
checkout is only read: no checkout, no index change). The build's inputs and its working folder
under the repository are taken from that folder; its cache key is the night's (the command
template, target, format, the inputs' content, the tools), so the same content is the same key."""

from __future__ import annotations

import io
import os
import subprocess
import tarfile
import threading
from dataclasses import dataclass, replace
from pathlib import Path

from harness.errors import HarnessError
from harness.lab import UsageError
from harness.lab.exports import ExportResult
from harness.lab.plan import ExportBuild, ExportJob, Target


class RecipeError(HarnessError):
    """git could not read the recipe repository (exit 1: the bisection's work failed)."""


def _git(root: Path, *args: str) -> str:
    try:
        proc = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=120)
    except FileNotFoundError:
        raise UsageError("harness bisect --axis inputs needs git on PATH") from None
    if proc.returncode != 0:
        raise UsageError(f"git -C {root} {' '.join(args)}: {proc.stderr.strip() or 'failed'}")
    return proc.stdout


@dataclass(frozen=True)
class Commit:
    sha: str
    subject: str

    @property
    def label(self) -> str:
        return f"{self.sha[:10]} {self.subject}"


@dataclass(frozen=True)
class RecipeRepo:
    """The git repository holding a build's inputs."""

    root: Path

    @classmethod
    def of_inputs(cls, build: ExportBuild) -> RecipeRepo:
        if not build.inputs:
            raise UsageError(f"{build.label or build.model}: the build declares no `inputs:`; the export axis "
                             "bisects the commits of the repository that holds them")
        first = build.inputs[0]
        where = first if first.is_dir() else first.parent
        top = Path(_git(where, "rev-parse", "--show-toplevel").strip())
        for path in build.inputs:
            if not path.resolve().is_relative_to(top.resolve()):
                raise UsageError(f"{build.label}: input {path} is outside the repository {top}; the export axis "
                                 "needs every input in one git repository")
        return cls(top)

    def resolve(self, rev: str) -> str:
        return _git(self.root, "rev-parse", "--verify", f"{rev}^{{commit}}").strip()

    def commits(self, old: str, new: str) -> list[Commit]:
        """`old`, then every commit on the ancestry path from it to `new` (oldest first)."""
        old_sha, new_sha = self.resolve(old), self.resolve(new)
        listed = _git(self.root, "log", "--reverse", "--ancestry-path", "--format=%H%x00%s",
                      f"{old_sha}..{new_sha}").splitlines()
        first = _git(self.root, "log", "-1", "--format=%H%x00%s", old_sha).strip()
        out = [Commit(*line.split("\0", 1)) for line in [first, *listed] if line]
        if len(out) < 2 or out[-1].sha != new_sha:
            raise UsageError(f"{self.root}: {new} does not descend from {old}; give an older point and a newer one")
        return out

    def head(self) -> str:
        return _git(self.root, "rev-parse", "HEAD").strip()

    def checkout(self, sha: str, dest: Path) -> Path:
        """The commit's tree under `dest` (made once; a folder already there is the same commit's)."""
        if (dest / ".complete").exists():
            return dest
        tmp = dest.with_name(dest.name + f".{os.getpid()}.part")
        tmp.mkdir(parents=True, exist_ok=True)
        data = subprocess.run(["git", "-C", str(self.root), "archive", "--format=tar", sha],
                              capture_output=True, timeout=300, check=True).stdout
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            tar.extractall(tmp, filter="data")
        (tmp / ".complete").touch()
        os.replace(tmp, dest)
        return dest


def _moved(path: Path, root: Path, tree: Path) -> Path:
    resolved = path.resolve()
    return tree / resolved.relative_to(root.resolve()) if resolved.is_relative_to(root.resolve()) else path


def build_at(build: ExportBuild, repo: RecipeRepo, tree: Path) -> ExportBuild:
    """The build with its inputs, working folder and any path in its command under the repository
    taken from `tree` (one commit's files)."""
    root = str(repo.root.resolve())

    def word(arg: str) -> str:
        return arg.replace(root, str(tree)) if root in arg else arg

    command = word(build.command) if isinstance(build.command, str) else tuple(word(a) for a in build.command)
    return replace(build, inputs=tuple(_moved(p, repo.root, tree) for p in build.inputs),
                   cwd=_moved(build.cwd, repo.root, tree), command=command)


@dataclass
class Exporter:
    """One commit's export through the night's cache (`harness/lab/exports`)."""

    cache_root: Path | None
    logs_dir: Path
    stop: threading.Event

    def export(self, build: ExportBuild, target: Target, fmt: str, keyed_as: ExportBuild) -> ExportResult:
        """The ExportResult of (build, target, format): a cache hit, or built and sealed. The key is
        `keyed_as`'s command template (the plan's, naming the user's checkout) with `build`'s inputs,
        so a commit the night built is the night's key although it runs from another folder."""
        from harness.lab.exports import (
            Builder,
            ExportCache,
            HostTools,
            default_cache_root,
            export_key,
            inputs_digest,
            key_material,
        )
        from harness.provision import HashCache, default_cache_path

        hashes = HashCache(default_cache_path())
        cache = ExportCache(self.cache_root or default_cache_root(), hashes)
        tools = HostTools.find()
        job = ExportJob(build, target, fmt)
        keyed = ExportJob(replace(build, command=keyed_as.command), target, fmt)
        key = export_key(key_material(keyed, inputs_digest(build.inputs, hashes), tools.versions))
        cache.leases.hold([key])
        result = Builder(cache, tools, self.stop, os.environ, self.logs_dir).run(job, key)
        hashes.save()
        return result
