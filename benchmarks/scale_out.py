"""Scale-out throughput: trials per second with 1, 2, 4 and 8 workers on one shared study.

Each point is a fresh database on a PostgreSQL server (a throwaway cluster started here, as the
tests do, unless --storage names a server) and a study of a recorded space (the replay runner,
no simulated delay), so nearly all of a trial's time is coordination: proposing, creating the
Optuna trial, heartbeats, the claim under the advisory lock, the store write with its raw
samples, completing the trial. Workers are ``workbench worker`` processes started together
once the study exists; their start-up is not counted.

Reported per worker count: study throughput (complete trials / the span from the first trial's
start to the last one's completion, database timestamps), and the coordination cost per trial
(each worker's loop time minus the time its runner spent answering, divided by the trials it
completed; mean over workers). On a 2-core machine, 8 workers share 2 cores with the server, so
that wall-clock cost grows with the number of processes waiting for a core; the CPU cost per
trial separates the work from the waiting: the workers' CPU time outside the runner, and the
PostgreSQL server's CPU time (throwaway cluster only), each divided by the study's trials.

    python benchmarks/scale_out.py [--trials 100] [--workers 1 2 4 8] [--storage URL]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import optuna

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT.parent / "shared" / "datasets" / "tuning-caches" / "pnpoly_RTX_3090.json.gz"
WORKBENCH = [sys.executable, "-m", "workbench.cli.main"]


def create_study(url: str, name: str, recording: Path, trials: int) -> None:
    """The study, as `workbench tune` creates it, without working on it."""
    from workbench.fleet.connection import open_database
    from workbench.fleet.sql import SETUP_LOCK
    from workbench.fleet.study import SharedStudy
    from workbench.search.request import (
        Budget,
        Coordination,
        Measuring,
        SearchStrategy,
        StudyChoice,
        TuneRequest,
    )
    from workbench.search.start import plan_tune

    request = TuneRequest(
        measuring=Measuring(replay=recording),
        strategy=SearchStrategy(budget=Budget(evaluations=trials)),
        study=StudyChoice(name=name, storage=url),
        coordination=Coordination(heartbeat_s=2, grace_s=10),
    )
    db, store = open_database(url, request.coordination)
    with db.lock(SETUP_LOCK):
        plan = plan_tune(request, store, shared=True).plans[0]
        SharedStudy.create(db, name, request.to_spec(), plan.runner.device.device_class())
    store.close()
    db.close()


def span_s(url: str, name: str) -> float:
    from optuna.trial import TrialState

    from workbench.fleet.connection import open_database
    from workbench.fleet.sql import CLAIM
    from workbench.fleet.study import SharedStudy
    from workbench.search.request import Coordination

    study = SharedStudy(open_database(url, Coordination())[0], name)
    done = [t for t in study.trials((TrialState.COMPLETE,)) if CLAIM in t.system_attrs]
    first = min(t.datetime_start for t in done)
    last = max(t.datetime_complete for t in done)
    return (last - first).total_seconds()


def run_point(
    url: str, workers: int, trials: int, recording: Path, server_cpu: Callable[[], float | None]
) -> dict:
    name = f"bench-{workers}"
    create_study(url, name, recording, trials)
    cpu0 = server_cpu()
    args = ["worker", "--storage", url, "--study", name, "--replay", str(recording), "--json"]
    procs = [
        subprocess.Popen(
            [*WORKBENCH, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(workers)
    ]
    stats = []
    for p in procs:
        out, err = p.communicate(timeout=1800)
        if p.returncode != 0:
            raise SystemExit(f"worker failed ({p.returncode}): {err[-2000:]}")
        stats.append(json.loads(out.strip().splitlines()[-1]))
    cpu1 = server_cpu()
    completed = sum(s["completed"] for s in stats)
    assert completed == trials, (completed, trials)
    worker_cpu = sum(s["cpu_seconds"] - s["runner_cpu_seconds"] for s in stats)
    span = span_s(url, name)
    coord = [
        1e3 * (s["seconds"] - s["runner_seconds"]) / s["completed"] for s in stats if s["completed"]
    ]
    skipped = {}
    for s in stats:
        for k, v in s["skipped"].items():
            skipped[k] = skipped.get(k, 0) + v
    return {
        "workers": workers,
        "trials": completed,
        "measured": sum(s["measured"] for s in stats),
        "span_s": round(span, 3),
        "trials_per_s": round(completed / span, 2),
        "coordination_ms_per_trial": round(sum(coord) / len(coord), 1),
        "coordination_ms_per_trial_by_worker": [round(c, 1) for c in coord],
        "worker_cpu_ms_per_trial": round(1e3 * worker_cpu / completed, 1),
        "server_cpu_ms_per_trial": None
        if cpu0 is None or cpu1 is None
        else round(1e3 * (cpu1 - cpu0) / completed, 1),
        "runner_ms_per_trial": round(
            1e3 * sum(s["runner_seconds"] for s in stats) / max(1, completed), 3
        ),
        "skipped": skipped,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=100, help="budget of each point")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument("--storage", help="an existing PostgreSQL server (a database per point)")
    ap.add_argument("--recording", type=Path, default=CACHE)
    ap.add_argument(
        "--out",
        type=Path,
        default=ROOT / "benchmarks" / "results",
        help="the directory the result file is written into (named after the machine and date)",
    )
    ap.add_argument(
        "--before", type=Path, help="an earlier result file to keep alongside, as 'before'"
    )
    a = ap.parse_args()
    load_before = os.getloadavg()
    points = []
    with _server(a.storage) as database:
        for n in a.workers:
            point = run_point(database(), n, a.trials, a.recording, database.server_cpu)
            points.append(point)
            print(
                f"{n} workers: {point['trials_per_s']:.2f} trials/s, coordination "
                f"{point['coordination_ms_per_trial']:.1f} ms/trial "
                f"(CPU: workers {point['worker_cpu_ms_per_trial']} ms, server "
                f"{point['server_cpu_ms_per_trial']} ms)",
                flush=True,
            )
    doc = {
        "benchmark": "scale_out",
        "date": dt.date.today().isoformat(),
        "machine": f"2-core CPU VM ({os.cpu_count()} logical CPUs, {platform.machine()}, "
        f"{platform.platform()}), no GPU; its 2 cores shared with other jobs (other agents' "
        "tests and a long benchmark): load average "
        f"{load_before[0]:.1f} before, {os.getloadavg()[0]:.1f} after",
        "recording": a.recording.name,
        "trials_per_point": a.trials,
        "optuna": optuna.__version__,
        "postgresql": _server_version(),
        "points": points,
    }
    if a.before is not None:
        doc["before"] = json.loads(a.before.read_text())
    print(
        f"\n{'workers':>7} {'trials/s':>9} {'coord ms/trial':>15} {'worker CPU ms':>14} "
        f"{'server CPU ms':>14} {'skipped':>24}"
    )
    for p in points:
        print(
            f"{p['workers']:>7} {p['trials_per_s']:>9.2f} {p['coordination_ms_per_trial']:>15.1f} "
            f"{p['worker_cpu_ms_per_trial']!s:>14} {p['server_cpu_ms_per_trial']!s:>14} "
            f"{json.dumps(p['skipped']):>24}"
        )
    a.out.mkdir(parents=True, exist_ok=True)
    path = a.out / f"scale_out-2core-cpu-{doc['date']}.json"
    path.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {path}")


_VERSION: list[str] = []


class _server:
    """A database factory: on --storage's server, or on a throwaway local cluster."""

    def __init__(self, url: str | None) -> None:
        self.url = url
        self.cluster = None

    def __enter__(self):
        if self.url is None:
            sys.path.insert(0, str(ROOT / "tests"))
            from pg_cluster import throwaway_cluster

            self._cm = throwaway_cluster()
            self.cluster = self._cm.__enter__()
            if isinstance(self.cluster, str):
                raise SystemExit(self.cluster)
        return self

    def __call__(self) -> str:
        return self._new_cluster_db() if self.cluster is not None else self._new_server_db()

    def server_cpu(self) -> float | None:
        """CPU seconds the throwaway cluster's processes used so far (None: another server).
        The postmaster's own and reaped children's times, plus its live children's."""
        if self.cluster is None:
            return None
        pid = int((self.cluster.data / "postmaster.pid").read_text().split()[0])
        tick = os.sysconf("SC_CLK_TCK")
        total = 0.0
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            me, parent = int(stat.parent.name), int(fields[1])
            if me == pid:  # utime, stime, cutime, cstime
                total += sum(int(f) for f in fields[11:15]) / tick
            elif parent == pid:
                total += sum(int(f) for f in fields[11:13]) / tick
        return total

    def _new_cluster_db(self) -> str:
        url = self.cluster.database()
        _remember_version(url)
        return url

    def _new_server_db(self) -> str:
        import psycopg

        name = "wb_bench_" + uuid.uuid4().hex[:8]
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        url = self.url.rsplit("/", 1)[0] + "/" + name
        _remember_version(url)
        return url

    def __exit__(self, *exc: object) -> None:
        if self.cluster is not None:
            self._cm.__exit__(*exc)


def _remember_version(url: str) -> None:
    import psycopg

    if not _VERSION:
        with psycopg.connect(url) as conn:
            _VERSION.append(conn.execute("SHOW server_version").fetchone()[0])


def _server_version() -> str | None:
    return _VERSION[0] if _VERSION else None


if __name__ == "__main__":
    main()
