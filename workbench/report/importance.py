"""Parameter importance: Optuna's PED-ANOVA over the study's correct evaluations.

The workbench's own samplers keep no Optuna study, so one is rebuilt in memory from the store:
each correct evaluation becomes a finished trial with categorical distributions over the
study's declared values. PED-ANOVA (Watanabe et al., IJCAI 2023) asks how much each
parameter matters for reaching the best ``TARGET_QUANTILE`` of the observed values.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import optuna
import plotly.graph_objects as go
from optuna.distributions import BaseDistribution, CategoricalDistribution
from optuna.trial import create_trial

from workbench.report.data import StudyData
from workbench.report.page import esc

optuna.logging.set_verbosity(optuna.logging.WARNING)  # no "study created" lines in a report run

#: PED-ANOVA's gamma': importance for reaching the best 10 % of evaluations (Optuna's default).
TARGET_QUANTILE = 0.1
#: Fewer correct evaluations than this leave the top quantile with one or two trials.
MIN_TRIALS = 10

METHOD = (
    f"Optuna PedAnovaImportanceEvaluator (PED-ANOVA, target quantile {TARGET_QUANTILE:g}, "
    "local), over the correct evaluations; parameters with one observed value are left out"
)


@dataclass(frozen=True)
class Importance:
    """Normalised importances (summing to 1), largest first, or why there are none."""

    method: str
    values: tuple[tuple[str, float], ...]
    trials: int
    reason: str | None = None


def gather_importance(data: StudyData) -> Importance:
    ok = data.ok
    names = [n for n in data.varying_parameters if len({str(e.config.get(n)) for e in ok}) > 1]
    if len(ok) < MIN_TRIALS:
        return Importance(
            METHOD, (), len(ok), f"{len(ok)} correct evaluations (PED-ANOVA needs {MIN_TRIALS})"
        )
    if not names:
        return Importance(METHOD, (), len(ok), "no parameter took two values")
    if len({e.measurement.value for e in ok}) < 2:  # nothing to explain: equal shares would say
        return Importance(METHOD, (), len(ok), "every correct evaluation has the same value")
    declared = dict(data.study.parameters)
    distributions: dict[str, BaseDistribution] = {}
    for n in names:
        seen = {e.config[n] for e in ok}
        choices = [v for v in declared.get(n, ()) if v in seen] or sorted(seen, key=str)
        distributions[n] = CategoricalDistribution(choices)
    study = optuna.create_study(direction="minimize")
    for e in ok:
        params = {n: e.config[n] for n in names}
        study.add_trial(
            create_trial(params=params, distributions=distributions, value=e.measurement.value)
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # experimental-API notices are not page content
        # imported here: optuna.importance pulls in scikit-learn (~0.6 s at CLI start-up)
        from optuna.importance import PedAnovaImportanceEvaluator, get_param_importances

        scores = get_param_importances(
            study, evaluator=PedAnovaImportanceEvaluator(target_quantile=TARGET_QUANTILE)
        )
    ranked = tuple(sorted(((k, float(v)) for k, v in scores.items()), key=lambda kv: -kv[1]))
    return Importance(METHOD, ranked, len(ok))


def draw_importance(imp: Importance) -> go.Figure:
    names = [esc(n) for n, _ in reversed(imp.values)]
    fig = go.Figure(
        go.Bar(
            x=[v for _, v in reversed(imp.values)],
            y=names,
            orientation="h",
            marker_color="#4a7fb5",
        )
    )
    fig.update_layout(
        title=f"parameter importance (PED-ANOVA, {imp.trials} correct evaluations)",
        xaxis_title="normalised importance",
        height=120 + 28 * len(names),
        margin={"l": 140, "t": 50},
    )
    return fig
