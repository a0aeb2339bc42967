"""Write the store's measured studies as workbench recordings, in the layout the no-GPU path of
``workbench tune K`` replays: ``<root>/recordings/<kernel>/<kernel>-<gpu>-<shape>.json.gz``
(``<root>`` is a folder of space files; the library's is ``tuning_spaces``).

Run on the GPU machine after short tunes (scripts/device_check.sh does): every configuration a
tune measured there (outcome, median, every sample) becomes an entry, so the recording costs no
second measurement. Replayed studies (``tune --replay``) are skipped: a recording holds only
what was measured. Usage::

    python3 scripts/study_recordings.py --store STORE.sqlite --root OUT/tuning_spaces [--kernel K]
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from workbench.spaces.model import base_kernel
from workbench.spaces.model import parse_shape_label as model_shape


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower() or "unknown"


def parse_shape_label(label: str) -> dict[str, int]:
    """``"M=1,N=4096,K=4096"`` (anything after ``;`` ignored) as a dict; {} when unparsable."""
    return model_shape(label.split(";", 1)[0]) or {}


def recording_name(kernel: str, gpu: str, shape: dict[str, int]) -> str:
    """File name with letters, digits, '.', '_' and '-' only (what the device tool returns)."""
    shape_part = "_".join(f"{k}{v}" for k, v in shape.items()) or "default"
    # reduce[OP=sum] -> reduce-OP-sum
    kernel_part = re.sub(r"[^A-Za-z0-9._]+", "-", kernel).strip("-")
    return f"{kernel_part}-{_slug(gpu)}-{shape_part}.json.gz"


def export(store_url: str, root: Path, kernels: set[str] | None = None) -> list[Path]:
    """One recording per measured study of ``kernels`` (all when None); returns the paths."""
    from sqlalchemy import select

    from workbench.runners.base import DeviceInfo
    from workbench.runners.recordings import write_recording
    from workbench.store.models import Environment, Run, Study
    from workbench.store.store import Store

    if "://" not in store_url:
        store_url = f"sqlite:///{Path(store_url).absolute()}"
    store = Store(store_url)
    written: list[Path] = []
    try:
        for study in store.studies():
            if study.replay_source or (kernels and study.kernel not in kernels):
                continue
            evaluations = store.evaluations(study)
            measured = [e for e in evaluations if not e.measurement.replayed_from]
            shape = parse_shape_label(study.shape_label)
            if not measured or not shape:
                continue
            with store.session() as s:
                env = s.scalars(
                    select(Environment)
                    .join(Run, Run.environment_id == Environment.id)
                    .where(Run.study_id == study.id)
                    .order_by(Run.id.desc())
                ).first()
                sha = s.scalar(select(Study.space_sha256).where(Study.id == study.id))
            if env is None:
                continue
            device = DeviceInfo(
                name=env.gpu_name,
                cc=env.cc,
                uuid=env.gpu_uuid,
                driver=env.driver,
                cuda=env.cuda,
                toolkit=env.toolkit,
                sm_clock_max_mhz=env.sm_clock_max_mhz,
                memory_clock_mhz=env.memory_clock_mhz,
            )
            path = (
                root
                / "recordings"
                / base_kernel(study.kernel)  # a variant's (reduce[OP=sum]) in its kernel's folder
                / recording_name(study.kernel, device.name, shape)
            )
            write_recording(
                path,
                kernel=study.kernel,
                device=device,
                parameters=study.parameters,
                entries=[(e.config, e.measurement) for e in measured],
                shape=shape,
                arch=study.arch,
                space_sha256=sha,
                extra={"source": "workbench tune study", "study": study.name},
            )
            ok = sum(1 for e in measured if e.measurement.value is not None)
            print(f"{path}: {len(measured)} configs ({ok} timed) from study {study.name!r}")
            written.append(path)
    finally:
        store.close()
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", required=True, help="store URL or SQLite path")
    parser.add_argument("--root", type=Path, required=True, help="folder that gets recordings/")
    parser.add_argument("--kernel", action="append", help="only these kernels (repeatable)")
    args = parser.parse_args(argv)
    paths = export(args.store, args.root, set(args.kernel) if args.kernel else None)
    print(f"{len(paths)} recordings written under {args.root / 'recordings'}")
    return 0 if paths else 1


if __name__ == "__main__":
    sys.exit(main())
