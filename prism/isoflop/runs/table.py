"""Read a runs CSV into RunRecords for the fit: strict about what it needs, indifferent to the rest.

Any CSV with `params`, `tokens`, `loss` and `budget` (or `flops`) works; other
columns only filter. Rows are numbered as a spreadsheet shows them (the header
is line 1), so an error can be found in the file.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

from prism.core.errors import PrismError
from prism.isoflop.records import RunRecord

REQUIRED = ("params", "tokens", "loss")
FILTER_COLUMNS = ("family", "backbone", "regime")


class TableValueError(PrismError):
    """Values no run can have (text, zero, negative): the table was changed by hand or damaged."""


@dataclass
class CollectedRun:
    """One row of the runs table, as collect writes it (its fields are the columns)."""

    run_id: str = ""
    family: str = ""
    backbone: str = ""
    variant: str = ""
    regime: str = ""
    budget: float | None = None
    flops: float | None = None
    params: float | None = None
    params_total: float | None = None
    tokens: float | None = None
    loss: float | None = None
    loss_std: float | None = None
    n_evals: int = 0
    status: str = "incomplete"
    steps: int | None = None
    final_eval_loss: float | None = None
    n_bad_lines: int = 0
    # From metrics.json where the trainer records them (empty otherwise): the loss's standard
    # error, epochs of the training split seen, warnings (e.g. a loss spike), wall time.
    loss_se: float | None = None
    epochs: float | None = None
    warnings: str = ""
    wall_s: float | None = None
    # The precision the run computed in (fp32, bf16); empty for runs from before it was recorded (fp32).
    precision: str = ""
    # Which path the model's blocks and loss took (prism.model.kernels: fused, aten); empty before it was recorded.
    kernel_path: str = ""
    # The plan's estimate of the wall time on the machine that measured samples/s.
    est_wall_s: float | None = None
    note: str = ""
    run_dir: str = ""


COLUMNS = list(CollectedRun.__dataclass_fields__)


def table_problem(csv_path: str | Path, planned: dict[str, str | Path] | None = None) -> str | None:
    """One line when the table at `csv_path` was changed by hand; None when it was not (or is absent).

    Changed: it holds values no run can have, or it lacks a row of a `planned` run (run id:
    its metrics.json) that finished before the table was written, which collect never leaves
    out. The workflow asks while its DAG is built: a fit job failing on the values would have
    lost the previous fit first, and one short of a run would say nothing. Any other fault
    (nothing to fit yet) is left to the fit.
    """
    path = Path(csv_path)
    if not path.is_file():
        return None
    try:
        load_runs(path)
    except TableValueError as err:
        return str(err)
    except PrismError:
        return None
    missing = _rows_missing(path, planned or {})
    if not missing:
        return None
    return (
        f"{path}: no row for {len(missing)} finished planned run(s) ({', '.join(missing[:3])}"
        f"{', ...' if len(missing) > 3 else ''}), which collect never leaves out: rows were removed by hand"
        + _fix(path, COLUMNS)
    )


def _rows_missing(path: Path, planned: dict[str, str | Path]) -> list[str]:
    """The planned runs finished before the table at `path` was written that it has no row for
    (none while a run is unfinished or finished later: collect makes the table again then)."""
    try:
        written = path.stat().st_mtime
        if not planned or any(Path(m).stat().st_mtime > written for m in planned.values()):
            return []
    except OSError:
        return []
    listed = {row.get("run_id") for row in read_rows(path)}
    return sorted(set(planned) - listed)


def table_text(rows: list[CollectedRun]) -> str:
    """The runs table's text, as collect writes it (atomically): the header, then a row a run."""

    def cell(v):
        return "" if v is None else repr(v) if isinstance(v, float) else v

    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows({k: cell(v) for k, v in asdict(r).items()} for r in rows)
    return buf.getvalue()


def read_rows(csv_path: str | Path) -> list[dict[str, str]]:
    """Every row of a runs table as written (column -> text): for the readers that show its rows rather than
    fit them (`load_runs`)."""
    with Path(csv_path).open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


@dataclass
class LoadedRuns:
    """The fittable records and an account of every row that was not used."""

    records: list[RunRecord]
    n_rows: int
    filters: dict[str, str]
    budget_source: str
    filtered_out: int = 0
    excluded_status: dict[str, list[int]] = field(default_factory=dict)
    excluded_nan: list[int] = field(default_factory=list)
    # every row left out by status or NaN: run_id, reason and whatever values it has (for the
    # fit's list of exclusions and the plots' marks)
    excluded_runs: list[dict] = field(default_factory=list)

    def summary(self) -> dict:
        return {
            "n_rows": self.n_rows,
            "n_used": len(self.records),
            "filters": self.filters,
            "budget_source": self.budget_source,
            "filtered_out": self.filtered_out,
            "excluded_status": {k: {"count": len(v), "lines": v} for k, v in self.excluded_status.items()},
            "excluded_nan": {"count": len(self.excluded_nan), "lines": self.excluded_nan},
        }


def _budget_from_flops(flops: float) -> float:
    """Runs of one IsoFLOP curve spend their budget to within ~1%: 2 significant digits name it."""
    return float(f"{flops:.1e}")


def _lines(rows: list[int]) -> str:
    shown = ", ".join(str(r) for r in rows[:10])
    return shown + (f" (and {len(rows) - 10} more)" if len(rows) > 10 else "")


def _optional(row: dict, col: str) -> float | None:
    """An optional numeric column (loss_se, flops): None when absent, empty or not a finite number."""
    try:
        v = float((row.get(col) or "").strip())
    except ValueError:
        return None
    return v if math.isfinite(v) else None


def _excluded(run_id: str, reason: str, kind: str, row: dict, budget_col: str) -> dict:
    values = {k: _optional(row, k) for k in REQUIRED}
    budget = _optional(row, budget_col)
    if budget is not None and budget_col == "flops" and budget > 0:
        budget = _budget_from_flops(budget)
    return {"run_id": run_id, "reason": reason, "kind": kind, **values, "budget": budget}


def _fix(path: Path, header: list[str]) -> str:
    """How to repair a table with unusable values: collect's own is rebuilt, never pruned (a row
    removed is a run silently left out of the fit); someone else's has its values corrected."""
    if header == COLUMNS:
        return (
            f"; it is collect's table of the runs' metrics, changed since it was written: delete it "
            f"(`rm {path}`) and collect rebuilds it (rerun the same snakemake command), rather than "
            "editing or dropping rows"
        )
    return "; correct those values (a row dropped is a run left out of the fit)"


def load_runs(
    csv_path: str | Path,
    family: str | None = None,
    backbone: str | None = None,
    regime: str | None = None,
) -> LoadedRuns:
    """Parse, filter and validate; raise PrismError naming the column and lines of anything unusable."""
    path = Path(csv_path)
    header, rows, budget_col = _read_table(path)
    filters = {"family": family, "backbone": backbone, "regime": None if regime in (None, "any") else regime}
    filters = {k: v for k, v in filters.items() if v is not None}
    for col in filters:
        if col not in header:
            raise PrismError(f"{path}: --{col} {filters[col]} given but the CSV has no {col!r} column")
    loaded = LoadedRuns([], len(rows), filters, budget_col)
    bad_text: dict[str, list[int]] = {}
    bad_sign: dict[str, list[int]] = {}
    for i, row in enumerate(rows):
        line = i + 2
        if any(row.get(col) != want for col, want in filters.items()):
            loaded.filtered_out += 1
            continue
        record = _record(row, line, budget_col, loaded, bad_text, bad_sign)
        if record is not None:
            loaded.records.append(record)
    for values, what in ((bad_text, "non-numeric values in"), (bad_sign, "values must be positive and finite in")):
        if values:
            raise TableValueError(
                f"{path}: {what} "
                + "; ".join(f"column {c!r} at line(s) {_lines(r)}" for c, r in values.items())
                + _fix(path, header)
            )
    if not loaded.records:
        raise PrismError(
            f"{path}: nothing to fit: {loaded.n_rows} rows, {loaded.filtered_out} filtered out by "
            f"{filters or 'no filter'}, {sum(len(v) for v in loaded.excluded_status.values())} with a status "
            f"other than ok, {len(loaded.excluded_nan)} with empty/NaN values"
        )
    return loaded


def _read_table(path: Path) -> tuple[list[str], list[dict], str]:
    """(header, rows, the budget's column) of a runs CSV that has the columns a fit needs."""
    if not path.is_file():
        raise PrismError(f"{path}: no such CSV file (make it with `prism isoflop collect`)")
    with path.open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        header = reader.fieldnames or []
        rows = list(reader)
    missing = [c for c in REQUIRED if c not in header]
    budget_col = "budget" if "budget" in header else "flops" if "flops" in header else None
    if budget_col is None:
        missing.append("budget (or flops)")
    if missing:
        raise PrismError(f"{path}: missing column(s) {', '.join(missing)}; the header has: {', '.join(header)}")
    return header, rows, budget_col


def _record(row: dict, line: int, budget_col: str, loaded: LoadedRuns, bad_text: dict, bad_sign: dict):
    """The RunRecord of a row the filters kept, or None: a status other than ok or an empty value is
    recorded in `loaded` as excluded, a value that is not a positive number in `bad_text`/`bad_sign`."""
    run_id = row.get("run_id") or f"line{line}"
    status = (row.get("status") or "ok").strip()
    if status != "ok":
        loaded.excluded_status.setdefault(status, []).append(line)
        loaded.excluded_runs.append(_excluded(run_id, f"status {status}", "status", row, budget_col))
        return None
    values = {}
    for col in (*REQUIRED, budget_col):
        text = (row.get(col) or "").strip()
        if text == "" or text.lower() in ("nan", "na", "none", "null"):
            values[col] = math.nan
            continue
        try:
            values[col] = float(text)
        except ValueError:
            bad_text.setdefault(col, []).append(line)
    if any(math.isnan(v) for v in values.values()) and len(values) == len(REQUIRED) + 1:
        loaded.excluded_nan.append(line)
        loaded.excluded_runs.append(_excluded(run_id, "empty/NaN value", "nan", row, budget_col))
        return None
    if len(values) < len(REQUIRED) + 1:
        return None
    for col, v in values.items():
        if not (v > 0 and math.isfinite(v)):
            bad_sign.setdefault(col, []).append(line)
    if any(not (v > 0 and math.isfinite(v)) for v in values.values()):
        return None
    budget = values[budget_col] if budget_col == "budget" else _budget_from_flops(values[budget_col])
    return RunRecord(
        run_id,
        values["params"],
        values["tokens"],
        values["loss"],
        budget,
        loss_se=_optional(row, "loss_se"),
        flops=_optional(row, "flops"),
        warnings=(row.get("warnings") or "").strip() or None,
    )
