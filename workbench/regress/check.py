"""Compare two regression runs config by config and shape by shape.

:func:`check` picks the runs (``--baseline``/``--candidate``), reads their samples and the
history of earlier runs, and applies :mod:`workbench.stats.rule` to every (shape, config)
measured in both. Runs on different GPUs are not comparable (never a regression); a config or
shape measured on one side only is not comparable; a candidate that failed (wrong result,
crash) where the baseline ran is BROKEN, one that ran where the baseline failed FIXED. When
the environment changed (GPU, driver, CUDA, toolkit) and something got slower, the report says
so and suggests re-tuning.

A sample that is not a time (NaN, zero, negative: a broken timer, a hand-edited store) is
dropped with a warning that names the run and the count, and the rest is compared; when too few
are left for the rule (:attr:`DecisionRule.min_samples`), the row is DAMAGED and the check
exits 2. A damaged measurement never passes the gate silently.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from workbench.regress.records import (
    RETUNE_FIELDS,
    MeasurementRecord,
    MissingBaselineError,
    RegressError,
    RunInfo,
    kernel_matches,
    list_runs,
    run_measurements,
)
from workbench.runners.base import TrialOutcome
from workbench.stats.rule import (
    CI_LEVEL,
    DecisionRule,
    Evidence,
    HistoryNoise,
    SampleComparison,
    Verdict,
    compare_samples,
    family_discoveries,
    history_estimate,
    history_p_value,
    intact_samples,
)
from workbench.store import Store
from workbench.store.environments import EnvChange

#: Earlier runs (up to the baseline, same kernel and GPU) whose medians measure history noise.
HISTORY_WINDOW = 20

Key = tuple[str, str]  #: (shape label, config key)


@dataclass(frozen=True)
class Row:
    """The verdict on one (shape, config)."""

    shape_label: str
    config_key: str
    verdict: Verdict
    baseline: MeasurementRecord | None
    candidate: MeasurementRecord | None
    comparison: SampleComparison | None = None
    note: str = ""
    #: the p-value the family step judged (the U test's or the history's, the larger)
    family_p: float | None = None
    #: samples dropped as not times (NaN, zero, negative): (baseline, candidate)
    dropped: tuple[int, int] = (0, 0)

    @property
    def key(self) -> Key:
        return (self.shape_label, self.config_key)

    def to_json(self) -> dict[str, object]:
        """The row as plain JSON values (ratio > 1: the candidate is slower)."""
        ev = self.comparison.time if self.comparison else None
        cyc = self.comparison.cycles if self.comparison else None
        either = self.candidate or self.baseline
        return {
            "shape": self.shape_label,
            "config": self.config_key,
            "params": dict(either.params) if either else None,
            "verdict": self.verdict.value,
            "baseline_median_ms": self.baseline.median if self.baseline else None,
            "candidate_median_ms": self.candidate.median if self.candidate else None,
            "samples": [
                len(self.baseline.samples) if self.baseline else 0,
                len(self.candidate.samples) if self.candidate else 0,
            ],
            **_evidence_json(ev),
            "cycles": _evidence_json(cyc) if cyc else None,
            "history_noise": self.comparison.history_noise if self.comparison else None,
            "family_p": self.family_p,
            "dropped_samples": list(self.dropped),
            "note": self.note,
        }


@dataclass(frozen=True)
class CheckReport:
    """Everything ``workbench regress check`` says."""

    baseline: RunInfo
    candidate: RunInfo
    rows: tuple[Row, ...]
    changes: tuple[EnvChange, ...]
    comparable: bool  #: False when the runs' GPUs (or kernels) differ
    hint: str | None  #: the re-tune suggestion, when one applies
    rule: DecisionRule

    def count(self, verdict: Verdict) -> int:
        return sum(1 for r in self.rows if r.verdict is verdict)

    @property
    def failed(self) -> bool:
        """A regression (or a broken config): ``regress check`` exits 1."""
        return any(r.verdict.fails for r in self.rows)

    @property
    def exit_status(self) -> int:
        """2 when a measurement is too damaged to compare, 1 on a regression, else 0."""
        return max((r.verdict.exit_status for r in self.rows), default=0)

    @property
    def warnings(self) -> list[str]:
        """One line per row whose damaged samples were dropped and the rest compared (a
        DAMAGED row says so in its verdict instead)."""
        return [
            f"{r.shape_label} {r.config_key}: "
            + dropped_note(self.baseline, self.candidate, r.baseline, r.candidate, r.dropped)
            for r in self.rows
            if any(r.dropped) and r.verdict is not Verdict.DAMAGED
        ]

    def to_json(self) -> dict[str, object]:
        """The report as plain JSON values."""
        return {
            "baseline": run_json(self.baseline),
            "candidate": run_json(self.candidate),
            "comparable": self.comparable,
            "environment_changes": [
                {"field": c.field, "before": c.before, "after": c.after} for c in self.changes
            ],
            "rule": {
                "test": "two-sided Mann-Whitney U on raw samples",
                "alpha": self.rule.alpha,
                "floor": self.rule.floor,
                "noise_k": self.rule.noise_k,
                "ci_level": CI_LEVEL,
                "family": "Benjamini-Hochberg over the compared rows",
                "family_q": self.rule.family_q,
            },
            "counts": {v.value: self.count(v) for v in Verdict},
            "regressions": self.count(Verdict.SLOWER),
            "hint": self.hint,
            "exit_status": self.exit_status,
            "rows": [r.to_json() for r in self.rows],
        }


def check(
    store: Store,
    baseline: str = "previous",
    candidate: str = "latest",
    *,
    kernel: str | None = None,
    rule: DecisionRule | None = None,
) -> CheckReport:
    """Compare two stored regression runs.

    Args:
        store: the open store.
        baseline: ``previous`` (the latest earlier run of the candidate's kernel, on the same
            GPU when there is one), a run id (``17`` or ``run:17``) or a label (``nightly`` or
            ``label:nightly``: the latest run so labelled before the candidate).
        candidate: ``latest`` (the latest run, of ``kernel`` when given), a run id or a label.
        kernel: restrict ``latest`` and labels to this kernel (and its variants).
        rule: the decision rule's parameters.

    Returns:
        The report (``exit_status`` 1 when something got slower or broke).

    Raises:
        RegressError: no such run, no regression run at all, or no baseline.
        StoreError: the store is damaged.
    """
    rule = rule or DecisionRule()
    runs = list_runs(store)
    cand = resolve_candidate(runs, candidate, kernel)
    base = resolve_baseline(runs, baseline, cand)
    prior = _history_runs(runs, base)
    measured = run_measurements(store, [base.id, cand.id, *(r.id for r in prior)])
    noise = _history_noise(prior, measured)
    return compare_runs(base, cand, measured[base.id], measured[cand.id], noise, rule)


def compare_runs(
    base: RunInfo,
    cand: RunInfo,
    base_ms: Sequence[MeasurementRecord],
    cand_ms: Sequence[MeasurementRecord],
    noise: Mapping[Key, HistoryNoise | None] | None = None,
    rule: DecisionRule | None = None,
) -> CheckReport:
    """Apply the decision rule to every (shape, config) of two runs, then the family step
    (the rule module's docstring) across the rows compared.

    Args:
        base: the baseline run.
        cand: the candidate run.
        base_ms: the baseline's measurements.
        cand_ms: the candidate's measurements.
        noise: history noise per (shape, config) (see :func:`history_estimate`).
        rule: the decision rule's parameters.

    Returns:
        The report, rows sorted by shape then config.
    """
    rule = rule or DecisionRule()
    noise = noise or {}
    b, c = {m.key: m for m in base_ms}, {m.key: m for m in cand_ms}
    changes = tuple(cand.environment.changes_from(base.environment))
    why_not = _incomparable(base, cand)
    rows = []
    for key in sorted(set(b) | set(c)):
        if why_not:
            rows.append(Row(*key, Verdict.NOT_COMPARABLE, b.get(key), c.get(key), note=why_not))
        else:
            sides = _Sides(base, cand, b.get(key), c.get(key))
            rows.append(_compare_one(key, sides, noise.get(key), rule))
    rows = family_step(rows, noise, rule.family_q)
    return CheckReport(
        base, cand, tuple(rows), changes, not why_not, _hint(cand, changes, rows, why_not), rule
    )


@dataclass(frozen=True)
class _Sides:
    """One (shape, config)'s measurements, and the runs they belong to (for messages)."""

    base_run: RunInfo
    cand_run: RunInfo
    base: MeasurementRecord | None
    cand: MeasurementRecord | None


def _compare_one(key: Key, sides: _Sides, noise: HistoryNoise | None, rule: DecisionRule) -> Row:
    base, cand = sides.base, sides.cand
    if base is None or cand is None:
        side = "baseline" if base is None else "candidate"
        return Row(*key, Verdict.NOT_COMPARABLE, base, cand, note=f"not measured in the {side}")
    if base.outcome is not TrialOutcome.OK:
        note = f"baseline {base.outcome.value}: {base.reason}".rstrip(": ")
        if cand.outcome is TrialOutcome.OK:  # no time to compare with, but news
            return Row(*key, Verdict.FIXED, base, cand, note=f"{note}; the candidate ran")
        return Row(*key, Verdict.NOT_COMPARABLE, base, cand, note=note)
    if cand.outcome is not TrialOutcome.OK:
        note = f"candidate {cand.outcome.value}: {cand.reason}".rstrip(": ")
        return Row(*key, Verdict.BROKEN, base, cand, note=note)
    return _compare_times(key, sides, base, cand, noise, rule)


def _compare_times(
    key: Key,
    sides: _Sides,
    base: MeasurementRecord,
    cand: MeasurementRecord,
    noise: HistoryNoise | None,
    rule: DecisionRule,
) -> Row:
    """The rule on two correct measurements' samples, those that are not times dropped."""
    (bs, bclk, b_lost), (cs, cclk, c_lost) = (
        intact_samples(*base.used()),
        intact_samples(*cand.used()),
    )
    dropped = (b_lost, c_lost)
    lost = dropped_note(sides.base_run, sides.cand_run, base, cand, dropped)
    if dropped != (0, 0) and min(len(bs), len(cs)) < rule.min_samples:
        note = (
            f"{lost}; {len(bs)} baseline and {len(cs)} candidate samples left, "
            f"{rule.min_samples} needed on each side: the measurement cannot be trusted"
        )
        return Row(*key, Verdict.DAMAGED, base, cand, note=note, dropped=dropped)
    try:
        result = compare_samples(
            bs,
            cs,
            baseline_clock=bclk,
            candidate_clock=cclk,
            history=noise.sigma if noise else None,
            rule=rule,
        )
    except ValueError as exc:  # samples the rule refuses: a damaged measurement, never a pass
        return Row(*key, Verdict.DAMAGED, base, cand, note=str(exc), dropped=dropped)
    clocks = (
        "SM clocks recorded on one side only" if result.cycles is None and (bclk or cclk) else ""
    )
    note = "; ".join(filter(None, [lost, result.note, clocks]))
    return Row(*key, result.verdict, base, cand, result, note, dropped=dropped)


def dropped_note(
    base_run: RunInfo,
    cand_run: RunInfo,
    base: MeasurementRecord | None,
    cand: MeasurementRecord | None,
    dropped: tuple[int, int],
) -> str:
    """``candidate run 7: 1 of 384 samples dropped (...)``, for each side that lost some
    (empty when none did)."""
    parts = []
    for role, run, m, n in (
        ("baseline", base_run, base, dropped[0]),
        ("candidate", cand_run, cand, dropped[1]),
    ):
        if n and m is not None:
            used = len(m.used()[0])
            parts.append(
                f"{role} run {run.id}: {n} of {used} samples dropped (NaN, zero or negative: "
                "not times)"
            )
    return "; ".join(parts)


def family_step(
    rows: Sequence[Row], noise: Mapping[Key, HistoryNoise | None], q: float
) -> list[Row]:
    """Benjamini-Hochberg across the compared rows: a change that is not a discovery among
    them is SAME, with a note. Each row's p-value is the largest of its U tests' and its
    history p-values (time, and cycles when compared): every test must pass, so every test's
    evidence must survive."""
    out = list(rows)
    compared = [i for i, r in enumerate(rows) if r.comparison and r.comparison.time]
    ps = [_row_p(rows[i], noise.get(rows[i].key)) for i in compared]
    for i, p, found in zip(compared, ps, family_discoveries(ps, q), strict=True):
        row = replace(rows[i], family_p=p)
        if row.verdict in (Verdict.SLOWER, Verdict.FASTER) and not found:
            why = (
                f"{row.verdict.value} on its own, but not among the {len(compared)} configs "
                f"compared (Benjamini-Hochberg at q = {q:g}: p = {p:.2g})"
            )
            row = replace(row, verdict=Verdict.SAME, note="; ".join(filter(None, [row.note, why])))
        out[i] = row
    return out


def _row_p(row: Row, noise: HistoryNoise | None) -> float:
    assert row.comparison is not None
    ps = []
    for ev in (row.comparison.time, row.comparison.cycles):
        if ev is not None:
            ps.append(ev.p_value)
            history = history_p_value(ev.ratio, noise)
            if history is not None:
                ps.append(history)
    return max(ps)


def _incomparable(base: RunInfo, cand: RunInfo) -> str:
    # another kernel first: then a GPU change is not the reason (and no re-tune is hinted)
    if base.kernel != cand.kernel:
        return f"different kernels: {base.kernel} vs {cand.kernel}"
    if base.environment.gpu_name != cand.environment.gpu_name:
        return f"different GPUs: {base.environment.gpu_name} vs {cand.environment.gpu_name}"
    return ""


def _hint(
    cand: RunInfo, changes: Sequence[EnvChange], rows: Sequence[Row], why_not: str
) -> str | None:
    moved = [c for c in changes if c.field in RETUNE_FIELDS]
    if not moved or why_not.startswith("different kernels"):
        return None
    what = ", ".join(c.text() for c in moved)
    command = (
        replay_command(cand.replayed_from)
        if cand.replayed_from
        else retune_command(cand.kernel, cand.shape_set)
    )
    if why_not.startswith("different GPUs"):
        return (
            f"The GPU changed ({what}): timings are not comparable across GPUs and the fastest "
            f"config is GPU-specific. Tune for this GPU"
            + (" (on its recording)" if cand.replayed_from else "")
            + f" and record a new baseline: {command}"
        )
    slower = sum(1 for r in rows if r.verdict.fails)
    if not slower:
        return None
    return (
        f"The environment changed ({what}) and {slower} config(s) got slower or broke: the "
        f"fastest config may be a different one now. Re-tune, then record a new baseline: "
        f"{command}"
    )


def replay_command(replayed_from: str) -> str:
    """``workbench tune --replay FILE`` for a run answered from a recording: there is no GPU
    to tune on, but the recording holds every config the search may ask for. ``replayed_from``
    is ``DEVICE (FILE, DATE)``, several joined by ``; ``."""
    files = re.findall(r"\(([^,()]+)(?:, [^()]*)?\)(?:;|$)", replayed_from)
    return " / ".join(f"workbench tune --replay {shlex.quote(f)}" for f in files) or (
        "workbench tune --replay FILE"
    )


def retune_command(kernel: str, shape_set: str | None) -> str:
    """``workbench tune reduce --set OP=max --shapes llm`` for ``reduce[OP=max]``; a kernel
    the library does not hold is found in the user's space directory (``--spaces DIR``)."""
    from workbench.errors import UnknownKernelError
    from workbench.spaces.registry import resolve_space

    name, _, variant = kernel.partition("[")
    parts = ["workbench", "tune", name]
    try:
        resolve_space(name)
    except UnknownKernelError:
        parts += ["--spaces", "DIR"]
    for item in filter(None, variant.rstrip("]").split(",")):
        parts += ["--set", item]
    if shape_set:
        parts += ["--shapes", shape_set]
    return shlex.join(parts)


# ---- choosing the runs -------------------------------------------------------------------------


def resolve_candidate(runs: Sequence[RunInfo], spec: str, kernel: str | None) -> RunInfo:
    """The run ``spec`` names (``latest``, an id, a label), of ``kernel`` when given.

    Raises:
        RegressError: no regression run, or none matches.
    """
    pool = [r for r in runs if kernel is None or kernel_matches(r.kernel, kernel)]
    if not pool:
        scope = f" of {kernel}" if kernel else ""
        raise RegressError(
            f"no regression run{scope} in the store: record one with `workbench regress record K`"
        )
    if spec == "latest":
        return pool[-1]
    return _named(runs, pool, spec, "candidate")


def resolve_baseline(runs: Sequence[RunInfo], spec: str, cand: RunInfo) -> RunInfo:
    """The baseline ``spec`` names for ``cand`` (``previous``, an id, a label).

    Raises:
        MissingBaselineError: ``previous`` and no earlier run of the kernel.
        RegressError: no such run.
    """
    before = [r for r in runs[: runs.index(cand)] if r.kernel == cand.kernel]
    if spec == "previous":
        same_gpu = [r for r in before if r.environment.gpu_name == cand.environment.gpu_name]
        if same_gpu or before:
            return (same_gpu or before)[-1]
        raise MissingBaselineError(
            f"no baseline: {cand.describe()} is the first regression run of {cand.kernel}; "
            "record a baseline first (a regression run with `label` baseline)"
        )
    return _named(runs, before, spec, "baseline")


def _named(runs: Sequence[RunInfo], pool: Sequence[RunInfo], spec: str, role: str) -> RunInfo:
    kind, sep, value = spec.partition(":")
    if not sep or kind not in ("run", "label"):  # (a label may hold a colon: ":zzz:")
        kind, value = ("run" if spec.isdigit() else "label"), spec
    if kind == "run" and value.isdigit():
        for r in runs:
            if r.id == int(value):
                return r
        raise RegressError(f"--{role} {spec}: no regression run with id {value}")
    if kind == "label":
        labelled = [r for r in pool if r.label == value]
        if labelled:
            return labelled[-1]
        scope = "earlier run of the candidate's kernel" if role == "baseline" else "run"
        text = f"--{role} {spec}: no {scope} is labelled {value!r}"
        itself = [r for r in runs if r.label == value and r not in pool]
        if role == "baseline" and itself and itself[-1] is runs[-1] and len(itself) == 1:
            text += (
                f" (run {itself[0].id}, the candidate, is itself: record a new run with "
                f"`workbench regress record {itself[0].kernel}` and check that against it)"
            )
        elif elsewhere := ", ".join(str(r.id) for r in runs if r.label == value):
            text += f" (run {elsewhere} is, but is later or of another kernel)"
        if known := sorted({r.label for r in pool if r.label}):
            text += f"; labels there: {', '.join(known)}"
        # a label that no earlier run has yet (the first CI run of `--baseline nightly`) is
        # a missing baseline, which --missing-ok lets pass
        raise MissingBaselineError(text) if role == "baseline" else RegressError(text)
    raise RegressError(
        f"--{role} {spec!r}: expected "
        + ("previous" if role == "baseline" else "latest")
        + ", a run id (17, run:17) or a label (nightly, label:nightly)"
    )


def _history_runs(runs: Sequence[RunInfo], base: RunInfo) -> list[RunInfo]:
    """Earlier runs of the baseline's kernel on its GPU, up to and including the baseline."""
    upto = runs[: runs.index(base) + 1]
    same = [
        r
        for r in upto
        if r.kernel == base.kernel and r.environment.gpu_name == base.environment.gpu_name
    ]
    return same[-HISTORY_WINDOW:]


def _history_noise(
    prior: Sequence[RunInfo], measured: Mapping[int, Sequence[MeasurementRecord]]
) -> dict[Key, HistoryNoise | None]:
    medians: dict[Key, list[float]] = {}
    for run in prior:
        for m in measured.get(run.id, ()):
            if m.outcome is TrialOutcome.OK and m.median:
                medians.setdefault(m.key, []).append(m.median)
    return {key: history_estimate(values) for key, values in medians.items()}


def _evidence_json(ev: Evidence | None) -> dict[str, object]:
    if ev is None:
        return {
            "ratio": None,
            "ci": None,
            "p_value": None,
            "sampling_noise": None,
            "threshold": None,
        }
    return {
        "ratio": ev.ratio,
        "ci": [ev.ci_low, ev.ci_high],
        "p_value": ev.p_value,
        "sampling_noise": ev.sampling_noise,
        "threshold": ev.threshold,
    }


def run_json(run: RunInfo) -> dict[str, object]:
    """A run as ``--json`` gives it (``regress check``, ``regress runs``)."""
    env = run.environment
    return {
        "id": run.id,
        "kernel": run.kernel,
        "label": run.label,
        "created_at": run.created_at.isoformat(),
        "replayed_from": run.replayed_from,
        "environment": {
            "id": env.id,
            "gpu": env.gpu_name,
            "driver": env.driver,
            "cuda": env.cuda,
            "toolkit": env.toolkit,
            "sm_clock_max_mhz": env.sm_clock_max_mhz,
            "git_commit": env.git_commit,
            "git_dirty": env.git_dirty,
            "replay_source": env.replay_source,
        },
    }
