"""The plain QNN program run once with QNN's profiling switched on at run time, as ExecuTorch's own
runner does it (`qnn_executor_runner --profile_level 2 --etdump_path ...`): the ETDump then holds
every QNN op's cycles, with no profiled lowering (docs/executorch-runner.md#per-op-cycles-night-to-night).

* an emulated HTP: the host's `pte_runner` with `--profile_level 2` (the same run-time option,
  harness/hostrt/executorch/backend_options.py): a forward program on its sample input, or a
  KV program (an export folder) decoding `TOKEN_STEPS` tokens, one call each;
* a device: `qnn_executor_runner` on the first export with `--profile_level 2` added, the ETDump
  pulled; nothing else differs from its plain run.

Each op's cycles are then the least of `ITERATIONS` calls: on a shared host the emulator's
cycles follow its contention, and contention only ever adds. Measured on the 2-core host at load
13-15 (docs/executorch-runner.md#per-op-cycles-night-to-night): one call per run, an op's cycles
spread up to 17x between runs; the least of 5 calls, up to 7.7x; the least of 20, up to 1.37x
(median 1.01)."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from harness.errors import HarnessError, TransportError
from harness.provision import provision_model
from harness.runners.executorch.catalogue import ArtifactKind, EtArtifact
from harness.suite.executorch.checks import EtInput

PROFILE_LEVEL = 2  # QNN's detailed level: one event per op
ITERATIONS = 20  # calls of a forward program (`--iteration`)
TOKEN_STEPS = ITERATIONS + 1  # a KV program's calls, teacher-forced: tokens 1..21 from position 0
# (its cycles do not depend on the ids)


@dataclass(frozen=True)
class Profiled:
    """An ETDump and what it profiled."""

    etdump: Path
    etrecord: Path | None
    qnn: bool  # QNN's per-op events, in cycles
    prefill_calls: int
    calls: int | None
    program: Path | None
    profile_level: int = 0  # the run-time level it ran with (0: the program's own)


class NoProfile(Exception):
    """This lane has nothing to profile (the message is the skip reason)."""


def plain_program(inp: EtInput) -> EtArtifact | None:
    """The QNN program to profile: the first format (by name) whose program runs on this SoC,
    a forward program with its input before a KV program."""
    ready = [a for _, a in sorted(inp.catalogue.formats.items()) if a.pte is not None and a.uses_qnn and not a.problem]
    return next((a for a in ready if a.kind is ArtifactKind.FORWARD and a.inputs), None) or \
        next((a for a in ready if a.kind is not ArtifactKind.FORWARD), None)


def emulator_run(inp: EtInput) -> Profiled:
    art = plain_program(inp)
    if art is None or art.pte is None:
        return _profiled_build(inp)
    runner, local = inp.runner, inp.work / "etdump"
    if art.kind is ArtifactKind.FORWARD:
        run = runner.forward(str(art.pte), [str(x) for x in art.inputs], local_dir=local, etdump=True,
                             iterations=ITERATIONS, timeout=inp.timeout, profile_level=PROFILE_LEVEL)
        calls = ITERATIONS
    else:
        model = provision_model(inp.transport, art.folder, name=f"et-{art.name}")
        tokens = _push_tokens(inp, local, art.name)
        run = runner.forward(posixpath.join(model.remote_dir, art.pte.name), [], local_dir=local, etdump=True,
                             tokens=tokens, timeout=inp.timeout, profile_level=PROFILE_LEVEL)
        calls = TOKEN_STEPS - 1
    if not run.ok or run.etdump is None:
        raise RuntimeError(f"{art.pte.name} with --profile_level {PROFILE_LEVEL}: {run.failure()}")
    return Profiled(run.etdump, art.etrecord, True, 1, calls, art.pte, PROFILE_LEVEL)


def _push_tokens(inp: EtInput, local: Path, name: str) -> str:
    local.mkdir(parents=True, exist_ok=True)
    here = local / "profile-tokens.npy"
    np.save(here, np.arange(1, TOKEN_STEPS + 1, dtype=np.int64).reshape(1, -1))
    there = posixpath.join(inp.runner.workspace, "profile", f"{name}-tokens.npy")
    try:
        inp.transport.makedirs(posixpath.dirname(there))
        inp.transport.push(here, there)
    except (TransportError, HarnessError) as exc:
        raise RuntimeError(f"pushing the profile run's tokens: {exc}") from None
    return there


def _profiled_build(inp: EtInput) -> Profiled:
    """No plain QNN program for this SoC: a build lowered with profiling (host material's `etdump/`)."""
    art = inp.catalogue.profiled
    if art is None or art.pte is None:
        raise NoProfile(f"no QNN program for {inp.device.soc_model} in {inp.catalogue.source} to profile")
    run = inp.runner.forward(str(art.pte), [str(x) for x in art.inputs], local_dir=inp.work / "etdump",
                             etdump=True, timeout=inp.timeout)
    if not run.ok or run.etdump is None:
        raise RuntimeError(f"{art.pte.name}: {run.failure()}")
    return Profiled(run.etdump, art.etrecord, True, 1, 1, art.pte)


def device_run(inp: EtInput) -> Profiled:
    found = next(iter(inp.catalogue.formats.values()), None)
    if found is None:
        raise NoProfile("no export folder with a .pte")
    model = provision_model(inp.transport, found.folder)
    result = inp.runner.executor(model.remote_dir).run(
        next(iter(model.configs.values())), local_dir=inp.work / "etdump", iterations=ITERATIONS,
        extra_args=("--profile_level", str(PROFILE_LEVEL)))
    if not (result.ok and "etdump" in result.files):
        raise RuntimeError(f"qnn_executor_runner --profile_level {PROFILE_LEVEL} gave no ETDump: {result.to_json()}")
    return Profiled(result.files["etdump"], found.etrecord, True, 1, None, found.pte, PROFILE_LEVEL)


__all__ = ["ITERATIONS", "NoProfile", "PROFILE_LEVEL", "Profiled", "device_run", "emulator_run", "plain_program"]
