"""`prism isoflop ...`."""

from __future__ import annotations

import argparse
import dataclasses

from prism.cli.renamed import add_renamed
from prism.cli.spec import add_spec_arguments, spec_from_args
from prism.core.options import add_arguments, from_namespace, validate
from prism.isoflop.design.calibrate import TIMED_RUN_SETTINGS, CalibrateOptions
from prism.isoflop.design.planoptions import PlanOptions
from prism.isoflop.design.tuning import FIT_FLAGS, RULE_FLAGS, RULE_PREFIX, TuneOptions
from prism.isoflop.present.options import PlotOptions
from prism.isoflop.runs.collect import CollectOptions
from prism.train.config import RunConfig
from prism.train.lr_schedule import COOLDOWN_FRACTION


def register(verbs: argparse._SubParsersAction) -> None:
    """Add this group's verbs; each sets `func` to a handler that calls one library function."""
    _register_calibrate(verbs)
    _register_plan(verbs)
    _register_tune(verbs)
    _register_launch(verbs)
    _register_collect(verbs)
    _register_fit(verbs)
    _register_predict(verbs)
    _register_plot(verbs)
    _register_summary(verbs)
    _register_status(verbs)
    _register_compare(verbs)


# --- calibrate -------------------------------------------------------------


def _register_calibrate(verbs: argparse._SubParsersAction) -> None:
    p = verbs.add_parser(
        "calibrate",
        help="Count parameters and training FLOPs per sample (meta device); optionally time real steps.",
        description=(
            "Write one calibration JSON for (family, backbone, projector variant, regime): parameters by "
            "component, FLOPs of one sample's forward+backward counted under FlopCounterMode on the meta "
            "device, the 6ND estimate beside it, and (with --measure-throughput) samples/s on --device."
        ),
    )
    p.add_argument("--backbone", required=True, help="backbone name (see `prism model list`)")
    p.add_argument("--projector-variant", required=True, dest="variant", help="BASE, W2X, W4X, D2X or D4X")
    p.add_argument("--family", required=True, help="modality family, e.g. text_image")
    p.add_argument("--regime", default="e2e", help="projector_only, encoder_projector or e2e (default: e2e)")
    p.add_argument("--seq-len", type=int, default=None, help="tokens per sample (default: the family's padded length)")
    # The settings the timed steps share with the runs they price: `prism train`'s flags, generated alike.
    shared = p.add_argument_group("the timed steps' run settings (as `prism train`; the workflow passes the study's)")
    add_arguments(shared, RunConfig, TIMED_RUN_SETTINGS)
    add_arguments(p.add_argument_group("timed steps (config `calibrate:`)"), CalibrateOptions)
    add_spec_arguments(p)
    out = p.add_mutually_exclusive_group(required=True)
    out.add_argument("--calibration-dir", help="write DIR/{family}__{backbone}__{variant}__{regime}.json")
    out.add_argument("--out", help="write this file instead")
    p.set_defaults(func=_calibrate)


def _calibrate(args: argparse.Namespace) -> int:
    opts = from_namespace(CalibrateOptions, args)
    spec = spec_from_args(args.family, args)
    if opts.measure_throughput:
        from prism.runtime.host import tune_host

        tune_host()  # the process settings training runs with, so the measured samples/s plan its cost
    from prism.isoflop.design.calibrate import run_calibrate

    path = run_calibrate(
        args.family,
        args.backbone,
        args.variant,
        args.regime,
        calibration_dir=args.calibration_dir,
        out=args.out,
        seq_len=args.seq_len,
        device=args.device,
        measure_throughput=opts.measure_throughput,
        batch_size=opts.batch_size,
        steps=opts.steps,
        threads=args.threads,
        precision=args.precision,
        compile=args.compile,
        spec=spec,
    )
    print(path)
    return 0


# --- fit -------------------------------------------------------------------

REGIME_CHOICES = ("projector_only", "encoder_projector", "e2e", "any")


def _register_fit(verbs: argparse._SubParsersAction) -> None:
    p = verbs.add_parser(
        "fit",
        help="Fit N_opt(C), D_opt(C) (Approach 2 and 3, bootstrap) and say whether the study determines them.",
        description=(
            "Read any CSV with params, tokens, loss and budget (or flops); other columns (family, backbone, "
            "regime, status) only filter. Approach 2: a parabola of loss in log N per budget (budgets with the "
            "minimum off the sampled range or no curvature are rejected, with the reason), then power laws in C. "
            "Approach 3: L = E + A/N^alpha + B/D^beta, Huber on log L, grid of starts, run to convergence. "
            "Writes JSON (programs) and Markdown (people) atomically; exits 2 when nothing can be fitted."
        ),
    )
    p.add_argument("--csv", required=True, help="runs CSV (e.g. from `prism isoflop collect`)")
    p.add_argument("--family", help="keep rows of this family (needs a family column)")
    p.add_argument("--backbone", help="keep rows of this backbone (needs a backbone column)")
    p.add_argument(
        "--regime", default="any", choices=REGIME_CHOICES, help="keep rows of this regime (default: any = no filter)"
    )
    from prism.isoflop.fit.fit import FitOptions  # numpy and SciPy: imported when this parser is built

    add_arguments(p.add_argument_group("fit options (config `fit:`)"), FitOptions)
    p.add_argument("--output-json", required=True, help="fit JSON to write")
    p.add_argument("--output-md", required=True, help="Markdown report to write")
    p.set_defaults(func=_fit)


def _fit(args: argparse.Namespace) -> int:
    from prism.isoflop.fit.fit import FitOptions
    from prism.isoflop.present.fitfiles import fit_csv

    opts = from_namespace(FitOptions, args)
    opts.validate()
    result = fit_csv(
        args.csv,
        args.output_json,
        args.output_md,
        family=args.family,
        backbone=args.backbone,
        regime=args.regime,
        options=opts,
    )
    parts = [f"{name} a={a:.4f}" for name, a in result.exponents()]
    v = result.verdict
    verdict = "identifiable" if v.identifiable else "NOT identifiable: " + (v.reasons[0] if v.reasons else "")
    print(f"{', '.join(parts)}; {verdict}; wrote {args.output_json} and {args.output_md}")
    return 0


# --- predict ---------------------------------------------------------------


def _register_predict(verbs: argparse._SubParsersAction) -> None:
    p = verbs.add_parser(
        "predict",
        help="What to train at a budget: N_opt, D_opt, loss and tokens/param with 80% prediction intervals.",
        description=(
            "From a fitted study (FAMILY_DIR/fit/REGIME.json, written by `prism isoflop fit`) or a runs CSV "
            "(fitted here, nothing written): at each budget the compute-optimal N and D (D from C and N through "
            "the study's FLOPs per token), the expected loss and tokens per parameter, each with an 80% "
            "prediction interval from the fit's joint uncertainty; the approach the verdict rests on answers. "
            "Says how many decades beyond the data each prediction lies, and the backtest on the largest budget."
        ),
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("study", nargs="?", metavar="FAMILY_DIR", help="a fitted study's family folder")
    src.add_argument("--csv", help="a runs CSV to fit first (as `prism isoflop fit --csv`)")
    p.add_argument("--budget", required=True, metavar="C1,C2", help="budgets in FLOPs, comma-separated (1e13,1e21)")
    p.add_argument("--regime", default="e2e", help="which fit of FAMILY_DIR (fit/REGIME.json; default: e2e)")
    from prism.isoflop.fit.fit import FitOptions  # numpy and SciPy: imported when this parser is built

    names = tuple(f.name for f in dataclasses.fields(FitOptions) if f.name != "predict")
    add_arguments(p.add_argument_group("fit options, with --csv (config `fit:`)"), FitOptions, names)
    p.set_defaults(func=_predict)


def _predict(args: argparse.Namespace) -> int:
    from prism.isoflop.present.predictread import predict_csv, predict_study

    if args.csv:
        from prism.isoflop.fit.fit import FitOptions

        given = {f.name: getattr(args, f.name) for f in dataclasses.fields(FitOptions) if f.name != "predict"}
        opts = FitOptions(**given)
        print("\n".join(predict_csv(args.csv, args.budget, validate(opts))))
    else:
        print("\n".join(predict_study(args.study, args.budget, args.regime)))
    return 0


# --- plan ------------------------------------------------------------------


def _csv_list(text: str) -> list[str]:
    return [t for t in text.replace(" ", "").split(",") if t]


def _register_plan(verbs: argparse._SubParsersAction) -> None:
    p = verbs.add_parser(
        "plan",
        help="Plan the runs of each budget from calibration, with the identifiability forecast.",
        description=(
            "For each budget: the candidate runs (backbone x variant) with N, FLOPs per sample, steps that "
            "spend the budget within 1%%, tokens D and node-hours; the grid is centred on the predicted "
            "optimum N_opt = k C^a and a budget whose grid does not bracket it is refused. Then a forecast "
            "simulates the study (prior surface + noise) and says whether it can determine the exponent. "
            "Each budget's runs depend only on that budget, so adding one never changes the others."
        ),
    )
    p.add_argument("--family", required=True, help="modality family, e.g. text_image")
    p.add_argument("--budgets", required=True, help="comma-separated FLOP budgets, e.g. 1e17,3e17")
    p.add_argument(
        "--calibration-dir",
        help="directory of calibration JSONs and measured speeds (a cache: a size without a file is counted "
        "here, and its speed interpolated from the measured sizes; none: every size counted, no speed)",
    )
    p.add_argument(
        "--scaling-study-dir",
        help="this study's folder: DIR/prior.json (a previous round's fit, or {a, k} "
        "optionally with E, A, B, alpha, beta) centres the grid and gives the forecast its loss surface",
    )
    p.add_argument("--regime", default="e2e", choices=REGIME_CHOICES[:-1], help="default: e2e")
    p.add_argument("--backbones", type=_csv_list, help="comma-separated (default: every calibrated one)")
    p.add_argument("--variants", type=_csv_list, help="comma-separated (default: every calibrated one)")
    p.add_argument(
        "--data",
        help="shard directory the runs train on: its training split's size gives each run's "
        "epochs, and runs above --max-epochs are dropped",
    )
    p.add_argument(
        "--cooldown-fraction",
        type=float,
        default=COOLDOWN_FRACTION,
        metavar="F",
        help="wsd cooldown share of a run's steps (the study's train.cooldown_fraction): what the "
        f"grid costs as wsd trajectories (default: {COOLDOWN_FRACTION})",
    )
    p.add_argument(
        "--job-ranks",
        type=int,
        default=1,
        metavar="R",
        help="processes of each training job (the launcher's ranks per node x a job's nodes; aurora: 12 a "
        "node): every run's global batch divides among them, and a --global-batch that does not is refused "
        "(default: 1)",
    )
    p.add_argument(
        "--ranks-per-node",
        type=int,
        default=None,
        metavar="R",
        help="the calibrations' measured speeds are of one of the R ranks a cluster node runs: price each "
        "run's node-hours from them instead of --node-peak-flops x --mfu (default: none)",
    )
    p.add_argument(
        "--probe",
        metavar="FILE",
        help="the probe's record (prism cluster probe): price node-hours with its loader and collectives, and "
        "say so; a path that does not exist yet labels them assumed (default: none)",
    )
    add_arguments(p.add_argument_group("plan options (config `plan:`)"), PlanOptions)
    _add_placement_arguments(p.add_argument_group("placement (config `cluster:`, `train:`)"))
    add_spec_arguments(p)
    _add_lr_rule_arguments(p.add_argument_group("learning-rate rule (config `tune:`)"))
    p.add_argument("--dry-run", action="store_true", help="print the table, the cost and the forecast; write nothing")
    p.add_argument("--out", help="plan.yaml to write (plan.csv beside it)")
    p.set_defaults(func=_plan)


def _add_lr_rule_arguments(p) -> None:
    """Every run's peak-lr rule (prism.train.lr_rule; TuneOptions' rule fields); the default: hand, today's."""
    add_arguments(p, TuneOptions, RULE_FLAGS, prefix=RULE_PREFIX)
    p.add_argument("--lr-rule-file", metavar="FILE", help="fitted: the rule `prism isoflop tune` wrote")
    p.add_argument(
        "--batch-law", type=float, nargs=2, metavar=("C", "B"),
        help="where the plan chooses the batch: at most the critical batch C x budget^B tokens (default: none)",
    )  # fmt: skip
    p.add_argument(
        "--lr-tokens", default="run", choices=("run", "size"),
        help="the tokens the rule sees: each run's own (default), or a size's geometric mean over its budgets "
        "(one lr per wsd trajectory)",
    )  # fmt: skip


def _lr_rule(args: argparse.Namespace):
    from prism.isoflop.design.tuning import study_rule

    options = validate(TuneOptions(**{name: getattr(args, name) for name in RULE_FLAGS}))
    return study_rule(options, args.lr_rule_file)


def _add_placement_arguments(p) -> None:
    """What each run is placed on (prism.isoflop.design.placement); the defaults: one device of this host."""
    p.add_argument(
        "--device-memory-gb", type=float, metavar="G", help="memory of one device in GiB (default: this host's RAM)"
    )
    p.add_argument("--devices-per-node", type=int, default=1, metavar="D", help="devices a node (default: 1)")
    p.add_argument("--nodes", type=int, default=1, metavar="N", help="the most nodes a run takes (default: 1)")
    p.add_argument("--nodes-by-backbone", metavar="B=N,...", help="the most nodes of particular backbones, e.g. 7b=2")
    p.add_argument(
        "--precision", default="fp32", choices=("fp32", "bf16"), help="the runs' precision (default: fp32, a CPU's)"
    )
    p.add_argument(
        "--strategy",
        default="none",
        choices=("none", "ddp", "fsdp", "hsdp"),
        help="how a run on several devices "
        "splits its state: ddp replicates it, fsdp shards it over its devices, hsdp over a node's (default: none)",
    )


def _placement_devices(args: argparse.Namespace):
    from prism.isoflop.design.placement import Devices, parse_nodes_by_backbone

    return Devices(
        args.device_memory_gb, args.devices_per_node, args.nodes, parse_nodes_by_backbone(args.nodes_by_backbone),
        args.precision, args.strategy,
    )  # fmt: skip


def _plan(args: argparse.Namespace) -> int:
    from prism.isoflop.design.planoptions import parse_budgets
    from prism.isoflop.design.planwrite import PlanStopped, run_plan

    spec = spec_from_args(args.family, args, args.data)  # no shape flags: the data's
    try:
        text = run_plan(
            args.out,
            args.dry_run,
            family=args.family,
            budgets=parse_budgets(args.budgets),
            calibration_dir=args.calibration_dir,
            scaling_study_dir=args.scaling_study_dir,
            regime=args.regime,
            backbones=args.backbones,
            variants=args.variants,
            data=args.data,
            options=from_namespace(PlanOptions, args),
            cooldown_fraction=args.cooldown_fraction,
            job_ranks=args.job_ranks,
            ranks_per_node=args.ranks_per_node,
            spec=spec,
            devices=_placement_devices(args),
            lr_rule=_lr_rule(args),
            probe=args.probe,
            lr_tokens=args.lr_tokens,
            batch_law=tuple(args.batch_law) if args.batch_law else None,
        )
    except PlanStopped as stopped:
        # The whole plan first (the log), then the one line: the error, last, is what the workflow shows.
        print(stopped.text, flush=True)
        raise
    print(text)
    return 0


# --- tune ------------------------------------------------------------------


def _register_tune(verbs: argparse._SubParsersAction) -> None:
    p = verbs.add_parser(
        "tune",
        help="Fit the peak-lr rule of a sweep's runs (the tuning stage): lr = c (d_model/128)^-p.",
        description=(
            "Per swept width, a parabola of loss in ln lr around the lowest point: its optimum (refused at the "
            "sweep's edge), error and curvature; then ln lr* = ln c - p ln(d_model/128) with its covariance by "
            "a parametric bootstrap. Writes the rule file `prism isoflop plan --lr-rule fitted` reads."
        ),
    )
    p.add_argument("metrics", nargs="+", help="the sweep runs' metrics.json (.../RUN_ID/lrLR/metrics.json)")
    p.add_argument("--out", required=True, help="the rule file to write (JSON)")
    add_arguments(p, TuneOptions, FIT_FLAGS)
    p.set_defaults(func=_tune)


def _tune(args: argparse.Namespace) -> int:
    from pathlib import Path

    from prism.core.ids import parse_run_id
    from prism.isoflop.design.tuning import fit_rule, read_sweep, write_rule
    from prism.model.config import backbone_config

    backbones = {parse_run_id(Path(m).parent.parent.name).backbone for m in args.metrics}
    curves, flops = read_sweep(args.metrics, {b: backbone_config(b).d_model for b in backbones})
    points = sorted({len(c.lrs) for c in curves})
    lrs = f"{points[0]}" if len(points) == 1 else f"{points[0]}-{points[-1]}"
    widths, lengths = len({c.d_model for c in curves}), len({c.tokens for c in curves})
    source = f"tuning stage: {len(curves)} sweeps of {lrs} lrs at {widths} widths and {lengths} lengths"
    print(write_rule(fit_rule(curves, args.bootstrap, args.seed, args.margin, flops, source), args.out))
    return 0


# --- launch ----------------------------------------------------------------


def _register_launch(verbs: argparse._SubParsersAction) -> None:
    from prism.launch import LauncherName
    from prism.train.options import TrainOptions

    p = verbs.add_parser(
        "launch",
        help="Run or submit every unfinished run of a plan (without Snakemake), keeping a ledger CSV.",
        description=(
            "For each run of plan.yaml, render the command with the training launchers (local, torchrun, or "
            "an aurora PBS job body submitted with qsub) and run it, or print it with --dry-run (which writes "
            "nothing). Finished runs (metrics.json present) are skipped. Every action appends a row "
            "(time, run_id, launcher, job_id, state, detail) to --ledger."
        ),
    )
    p.add_argument("--plan", required=True, help="plan.yaml from `prism isoflop plan`")
    p.add_argument("--launcher", required=True, action=LauncherName, help="how each run starts")
    add_renamed(p, "--ledger", "--csv", required=True, help="ledger CSV (appended)")
    p.add_argument("--data", required=True, help="shard directory from `prism data build`")
    p.add_argument("--runs-dir", help="where run directories go (default: runs/ beside the plan)")
    p.add_argument("--calibration-dir", help="calibration JSONs (default: the plan's calibration_dir)")
    p.add_argument("--nodes", type=int, default=1, help="nodes per job (aurora; default: 1)")
    p.add_argument("--procs-per-node", type=int, help="processes per node (torchrun, aurora)")
    # The runs' shared settings are `prism train`'s (the config's `train:` section), with its defaults.
    add_arguments(p, TrainOptions, ("seed", "device", "strategy", "storage"))
    p.add_argument("--dry-run", action="store_true", help="print each command or job body; run and write nothing")
    p.set_defaults(func=_launch)


def _launch(args: argparse.Namespace) -> int:
    from prism.isoflop.runs.launch import launch_plan
    from prism.train.options import TrainOptions

    results = launch_plan(
        args.plan,
        args.launcher,
        args.ledger,
        args.data,
        runs_dir=args.runs_dir,
        calibration_dir=args.calibration_dir,
        dry_run=args.dry_run,
        nodes=args.nodes,
        procs_per_node=args.procs_per_node,
        options=validate(
            TrainOptions(seed=args.seed, device=args.device, strategy=args.strategy, storage=args.storage)
        ),
    )
    failed = [r["run_id"] for r in results if r["state"] in ("failed", "submit-failed")]
    return 1 if failed else 0


# --- collect ---------------------------------------------------------------


def _register_collect(verbs: argparse._SubParsersAction) -> None:
    p = verbs.add_parser(
        "collect",
        help="One CSV row per run (finished, unfinished, collapsed, stale or broken).",
        description=(
            "Scan --runs-dir for run directories (those with config.yaml) and write one row each: run_id, family, "
            "backbone, variant, regime, budget, flops, params, params_total, tokens, loss (its final "
            "evaluation, from metrics.json), loss_std (over the last --eval-window evaluations), n_evals, "
            "status (ok|incomplete|collapsed|stale|error), "
            "loss_se, epochs, warnings, wall_s, est_wall_s, n_bad_lines, note. With --plan, every planned run "
            "gets a row and a run the plan does not hold, or one trained on other data (--data) or another "
            "calibration, is `stale` (never fitted). Corrupt lines are reported and counted, never fatal. "
            "Without --force an existing CSV newer than every run file, listing the same runs, is left untouched."
        ),
    )
    add_renamed(
        p, "--runs-dir", "--outputs", required=True, metavar="DIR", help="directory holding the run directories"
    )
    p.add_argument("--plan", help="the study's plan.yaml: its runs are the study's")
    p.add_argument("--data", metavar="DIR", help="the study's shard directory: runs trained on other data are stale")
    add_arguments(p.add_argument_group("collect options (config `collect:`)"), CollectOptions)
    add_renamed(p, "--out", "--csv", required=True, help="runs CSV to write")
    p.add_argument("--force", action="store_true", help="rewrite the CSV even if it looks up to date")
    p.set_defaults(func=_collect)


def _collect(args: argparse.Namespace) -> int:
    from prism.isoflop.runs.collect import collect

    print(
        collect(
            args.runs_dir,
            args.out,
            from_namespace(CollectOptions, args),
            plan=args.plan,
            data=args.data,
            force=args.force,
        )
    )
    return 0


# --- plot ------------------------------------------------------------------


def _register_plot(verbs: argparse._SubParsersAction) -> None:
    p = verbs.add_parser(
        "plot",
        help="PNG figures: IsoFLOP curves, N_opt/D_opt power laws, Approach 3 predicted vs observed.",
        description=(
            "Write isoflop_curves.png, scaling_laws.png, approach3_fit.png and training_curves.png (eval loss "
            "against FLOPs of every run) to --outdir from the runs CSV and the fit JSON (without --fit-json a "
            "point fit without bootstrap is made here)."
        ),
    )
    p.add_argument("--csv", required=True, help="runs CSV")
    p.add_argument("--fit-json", help="fit JSON from `prism isoflop fit` (recommended: carries the bootstrap bands)")
    p.add_argument("--family", help="keep rows of this family")
    p.add_argument("--regime", default="any", choices=REGIME_CHOICES, help="keep rows of this regime (default: any)")
    add_arguments(p.add_argument_group("plot options (config `plot:`)"), PlotOptions)
    p.add_argument("--outdir", required=True, help="directory for the PNGs")
    p.set_defaults(func=_plot)


def _plot(args: argparse.Namespace) -> int:
    from prism.isoflop.present.curves import plot_training_curves
    from prism.isoflop.present.plot import plot_study

    opts = from_namespace(PlotOptions, args)
    for path in plot_study(args.csv, args.outdir, args.fit_json, args.family, args.regime, opts.dpi):
        print(path)
    print(plot_training_curves(args.csv, args.outdir, args.fit_json, args.family, args.regime, opts.dpi))
    if args.fit_json:
        from pathlib import Path

        from prism.core.atomic import write_text_atomic
        from prism.isoflop.present.summary import ANSWER, answer_html

        print(write_text_atomic(Path(args.outdir) / ANSWER, answer_html(args.fit_json, args.outdir)))
    return 0


# --- summary ---------------------------------------------------------------


def _register_summary(verbs: argparse._SubParsersAction) -> None:
    p = verbs.add_parser(
        "summary",
        help="The answer of fitted studies in a few lines: exponents with intervals, verdict, runs left out, figures.",
        description=(
            "For each FAMILY_DIR (a study's family folder, e.g. scaling-study/text_image) and each fit/*.json in "
            "it: the exponents a (N_opt) and b (D_opt) with their intervals, the verdict and its main reason, the "
            "accepted budgets, runs excluded or collapsed (from runs.csv), the estimated against the measured "
            "wall time, and where the figures and the report are. Snakemake prints it when a study finishes."
        ),
    )
    p.add_argument("family_dirs", nargs="+", metavar="FAMILY_DIR", help="study family folder(s)")
    p.add_argument(
        "--html",
        metavar="OUT",
        help="write the summary and the fit's tables as one HTML page instead (the workflow's report shows it)",
    )
    p.set_defaults(func=_summary)


def _summary(args: argparse.Namespace) -> int:
    """Exit 1 when a folder holds no fit (after printing what there is): a script asking for an answer
    must not take "no fit yet" for one."""
    import sys
    from pathlib import Path

    from prism.isoflop.present.summary import summarize, summary_html

    unfitted = [d for d in args.family_dirs if not any(Path(d, "fit").glob("*.json"))]
    if args.html:
        from prism.core.atomic import write_text_atomic

        write_text_atomic(args.html, summary_html(args.family_dirs))
        print(f"wrote {args.html}")
    else:
        print(summarize(args.family_dirs))
    for folder in unfitted:
        why = "no such folder" if not Path(folder).is_dir() else "no fit/*.json in it"
        print(
            f"prism isoflop summary: {folder}: {why}; `snakemake fit_FAMILY` writes the fit "
            f"(FAMILY_DIR is a study's family folder, e.g. scaling-study/text_image)",
            file=sys.stderr,
        )
    return 1 if unfitted else 0


# --- status ----------------------------------------------------------------


def _register_status(verbs: argparse._SubParsersAction) -> None:
    from prism.isoflop.runs.status import ACTIVE_SECONDS

    p = verbs.add_parser(
        "status",
        help="Where a study stands while it runs: runs done/running/failed/waiting per budget, FLOPs, time, ETA.",
        description=(
            "Reads only the study folder (plan.yaml and the run directories; safe on a login node while jobs "
            "run): planned, running, done, failed and stale runs per budget, FLOPs done against planned, the "
            "measured time against the plan's estimate, an ETA, and each running or failed run's step and loss."
        ),
    )
    p.add_argument("study", metavar="STUDY", help="a study folder (e.g. scaling-study) or one family folder of it")
    p.add_argument(
        "--active-within",
        type=float,
        default=ACTIVE_SECONDS,
        metavar="S",
        help="a run without a lock held on this host counts as running when one of its files changed "
        "within this many seconds (jobs on other nodes)",
    )
    p.set_defaults(func=_status)


def _status(args: argparse.Namespace) -> int:
    from prism.isoflop.runs.status import family_dirs, status_text, study_status

    print("\n\n".join(status_text(study_status(d, args.active_within)) for d in family_dirs(args.study)))
    return 0


# --- compare ---------------------------------------------------------------


def _register_compare(verbs: argparse._SubParsersAction) -> None:
    p = verbs.add_parser(
        "compare",
        help="Two studies of one grid side by side (cosine vs wsd): exponents with intervals, per-run losses.",
        description=(
            "Read each study's fit JSON, runs.csv and plan (STUDY/FAMILY/...) and write a markdown report: a of "
            "each approach with its interval and whether the intervals overlap, each run's loss in both and the "
            "relative difference, and the FLOPs of the grid as cosine runs and as wsd trajectories."
        ),
    )
    p.add_argument("--study-a", required=True, metavar="DIR", help="the reference study dir (cosine)")
    p.add_argument("--study-b", required=True, metavar="DIR", help="the study to check (wsd)")
    p.add_argument("--family", required=True)
    p.add_argument("--regime", default="e2e")
    p.add_argument("--label-a", default="cosine")
    p.add_argument("--label-b", default="wsd")
    p.add_argument(
        "--cooldown-fraction",
        type=float,
        metavar="F",
        help="wsd cooldown share (default: the one STUDY_B's plan.yaml records)",
    )
    p.add_argument("--out", metavar="MD", help="write the report here too")
    p.set_defaults(func=_compare)


def _compare(args: argparse.Namespace) -> int:
    from prism.isoflop.present.compare import compare

    print(
        compare(
            args.study_a,
            args.study_b,
            args.family,
            out=args.out,
            regime=args.regime,
            label_a=args.label_a,
            label_b=args.label_b,
            cooldown_fraction=args.cooldown_fraction,
        ),
        end="",
    )
    return 0
