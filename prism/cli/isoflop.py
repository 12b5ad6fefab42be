"""`prism isoflop ...`."""

from __future__ import annotations

import argparse
import dataclasses


def register(verbs: argparse._SubParsersAction) -> None:
    """Add this group's verbs; each sets `func` to a handler that calls one library function."""
    _register_calibrate(verbs)
    _register_plan(verbs)
    _register_launch(verbs)
    _register_collect(verbs)
    _register_fit(verbs)
    _register_plot(verbs)


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
    p.add_argument("--device", default="auto", help="auto|cpu|cuda|xpu: where --measure-throughput runs (default: auto)")
    p.add_argument("--measure-throughput", action="store_true", help="time real fp32 fwd+bwd+AdamW steps on --device")
    p.add_argument("--batch-size", type=int, default=32, help="samples per timed step (default: 32)")
    p.add_argument("--steps", type=int, default=5, help="timed steps after 2 warm-up steps (default: 5)")
    p.add_argument("--threads", type=int, default=None, help="CPU threads for the timed steps (default: torch's)")
    out = p.add_mutually_exclusive_group(required=True)
    out.add_argument("--calibration-dir", help="write DIR/{family}__{backbone}__{variant}__{regime}.json")
    out.add_argument("--out", help="write this file instead")
    p.set_defaults(func=_calibrate)


def _calibrate(args: argparse.Namespace) -> int:
    if args.measure_throughput:
        from prism.host import tune_host

        tune_host()  # the process settings training runs with, so the measured samples/s plan its cost
    from prism.isoflop.calibrate import run_calibrate

    path = run_calibrate(
        args.family, args.backbone, args.variant, args.regime, calibration_dir=args.calibration_dir, out=args.out,
        seq_len=args.seq_len, device=args.device, measure_throughput=args.measure_throughput,
        batch_size=args.batch_size, steps=args.steps, threads=args.threads,
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
    p.add_argument("--regime", default="any", choices=REGIME_CHOICES, help="keep rows of this regime (default: any = no filter)")
    from prism.isoflop.fit import FitOptions

    # Flags from FitOptions: the defaults and help live there, in one place.
    for f in dataclasses.fields(FitOptions):
        kind = {"int": int, "float": float}.get(str(f.type), str)
        extra = {"choices": f.metadata["choices"]} if "choices" in f.metadata else {}
        p.add_argument(f"--{f.name.replace('_', '-')}", type=kind, default=f.default,
                       help=f"{f.metadata['help']} (default: {f.default})".replace("%", "%%"), **extra)
    p.add_argument("--output-json", required=True, help="fit JSON to write")
    p.add_argument("--output-md", required=True, help="Markdown report to write")
    p.set_defaults(func=_fit)


def _fit(args: argparse.Namespace) -> int:
    from prism.isoflop.fit import FitOptions, fit_csv

    options = FitOptions(**{f.name: getattr(args, f.name) for f in dataclasses.fields(FitOptions)})
    result = fit_csv(
        args.csv, args.output_json, args.output_md, family=args.family, backbone=args.backbone,
        regime=args.regime, options=options,
    )
    parts = [f"{name} a={fit.a:.4f}" for name, fit in (("approach2", result.approach2), ("approach3", result.approach3))
             if fit is not None and fit.a is not None]
    v = result.verdict
    verdict = "identifiable" if v.identifiable else "NOT identifiable: " + (v.reasons[0] if v.reasons else "")
    print(f"{', '.join(parts)}; {verdict}; wrote {args.output_json} and {args.output_md}")
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
    p.add_argument("--calibration-dir", required=True, help="directory of calibration JSONs")
    p.add_argument("--scaling-study-dir", help="the study dir; a previous round's fit copied to DIR/prior.json (or {a, k}, optionally with "
                   "E, A, B, alpha, beta) centres the grid and gives the forecast its loss surface")
    p.add_argument("--regime", default="e2e", choices=REGIME_CHOICES[:-1], help="default: e2e")
    p.add_argument("--backbones", type=_csv_list, help="comma-separated (default: every calibrated one)")
    p.add_argument("--variants", type=_csv_list, help="comma-separated (default: every calibrated one)")
    p.add_argument("--global-batch", type=int, help="samples per step (default: per run, the largest power of 2 leaving --min-steps)")
    p.add_argument("--min-steps", type=int, default=50, help="drop runs with fewer steps (default: 50, which keeps FLOPs within 1%%)")
    p.add_argument("--window", type=float, default=0.6, help="keep candidates within this many decades of N_opt (default: 0.6)")
    p.add_argument("--prior-a", type=float, help="prior exponent of N_opt = k C^a (default 0.5; overrides a previous fit)")
    p.add_argument("--prior-k", type=float, help="prior coefficient k (default 0.1; overrides a previous fit)")
    p.add_argument("--data-tokens", type=float, help="training tokens the data holds; runs needing more (x --max-epochs) are dropped")
    p.add_argument("--max-epochs", type=float, default=1.0, help="passes over the data allowed with --data-tokens (default: 1)")
    p.add_argument("--noise", type=float, default=None, help="loss noise std for the forecast (default: a previous "
                   "fit's measured noise, else 0.5-2%% of the simulated loss)")
    p.add_argument("--simulations", type=int, default=200, help="simulated studies in the forecast (default: 200)")
    p.add_argument("--seed", type=int, default=0, help="forecast seed (default: 0)")
    p.add_argument("--dry-run", action="store_true", help="print the table and the forecast; write nothing")
    p.add_argument("--out", help="plan.yaml to write (plan.csv beside it)")
    p.set_defaults(func=_plan)


def _plan(args: argparse.Namespace) -> int:
    from prism.isoflop.plan import parse_budgets, run_plan

    print(
        run_plan(
            args.out, args.dry_run, family=args.family, budgets=parse_budgets(args.budgets),
            calibration_dir=args.calibration_dir, scaling_study_dir=args.scaling_study_dir, regime=args.regime,
            backbones=args.backbones, variants=args.variants, global_batch=args.global_batch,
            prior_a=args.prior_a, prior_k=args.prior_k, window=args.window, min_steps=args.min_steps,
            data_tokens=args.data_tokens, max_epochs=args.max_epochs, noise=args.noise,
            simulations=args.simulations, seed=args.seed,
        )
    )
    return 0


# --- launch ----------------------------------------------------------------


def _register_launch(verbs: argparse._SubParsersAction) -> None:
    p = verbs.add_parser(
        "launch",
        help="Run or submit every unfinished run of a plan (without Snakemake), keeping a ledger CSV.",
        description=(
            "For each run of plan.yaml, render the command with the training launchers (local, torchrun, or "
            "an aurora PBS job body submitted with qsub) and run it, or print it with --dry-run (which writes "
            "nothing). Finished runs (metrics.json present) are skipped. Every action appends a row "
            "(time, run_id, launcher, job_id, state, detail) to --csv."
        ),
    )
    p.add_argument("--plan", required=True, help="plan.yaml from `prism isoflop plan`")
    p.add_argument("--launcher", required=True, choices=("local", "torchrun", "aurora"))
    p.add_argument("--csv", required=True, help="ledger CSV (appended)")
    p.add_argument("--data", required=True, help="shard directory from `prism data build`")
    p.add_argument("--runs-dir", help="where run directories go (default: runs/ beside the plan)")
    p.add_argument("--calibration-dir", help="calibration JSONs (default: the plan's calibration_dir)")
    p.add_argument("--nodes", type=int, default=1, help="nodes per job (aurora; default: 1)")
    p.add_argument("--procs-per-node", type=int, help="processes per node (torchrun, aurora)")
    p.add_argument("--storage", default="local", choices=("local", "lustre", "daos"), help="aurora: where shards are read")
    p.add_argument("--strategy", default="none", choices=("none", "ddp", "fsdp", "hsdp"), help="parallel strategy (default: none)")
    p.add_argument("--device", default="auto", help="auto|cpu|cuda|xpu (default: auto)")
    p.add_argument("--seed", type=int, default=0, help="seed of every run (default: 0)")
    p.add_argument("--dry-run", action="store_true", help="print each command or job body; run and write nothing")
    p.set_defaults(func=_launch)


def _launch(args: argparse.Namespace) -> int:
    from prism.isoflop.launch import launch_plan

    results = launch_plan(
        args.plan, args.launcher, args.csv, args.data, runs_dir=args.runs_dir,
        calibration_dir=args.calibration_dir, dry_run=args.dry_run, nodes=args.nodes,
        procs_per_node=args.procs_per_node, storage=args.storage, strategy=args.strategy,
        device=args.device, seed=args.seed,
    )
    failed = [r["run_id"] for r in results if r["state"] in ("failed", "submit-failed")]
    return 1 if failed else 0


# --- collect ---------------------------------------------------------------


def _register_collect(verbs: argparse._SubParsersAction) -> None:
    p = verbs.add_parser(
        "collect",
        help="One CSV row per run directory (finished, unfinished, collapsed or broken).",
        description=(
            "Scan ROOT for run directories (those with config.yaml) and write one row each: run_id, family, "
            "backbone, variant, regime, budget, flops, params, params_total, tokens, loss (mean of the last "
            "--eval-window evaluations), loss_std, n_evals, status (ok|incomplete|collapsed|error), n_bad_lines, "
            "note. Corrupt lines are reported (run, file, line) and counted, never fatal. Without --force an "
            "existing CSV newer than every run file, listing the same runs, is left untouched."
        ),
    )
    p.add_argument("--outputs", required=True, metavar="ROOT", help="directory holding the run directories")
    p.add_argument("--csv", required=True, help="runs CSV to write")
    p.add_argument("--eval-window", type=int, default=5, help="average the last this-many evaluations (default: 5)")
    p.add_argument("--force", action="store_true", help="rewrite the CSV even if it looks up to date")
    p.set_defaults(func=_collect)


def _collect(args: argparse.Namespace) -> int:
    from prism.isoflop.collect import collect

    print(collect(args.outputs, args.csv, eval_window=args.eval_window, force=args.force))
    return 0


# --- plot ------------------------------------------------------------------


def _register_plot(verbs: argparse._SubParsersAction) -> None:
    p = verbs.add_parser(
        "plot",
        help="PNG figures: IsoFLOP curves, N_opt/D_opt power laws, Approach 3 predicted vs observed.",
        description=(
            "Write isoflop_curves.png, scaling_laws.png and approach3_fit.png to --outdir from the runs CSV "
            "and the fit JSON (without --fit-json a point fit without bootstrap is made here)."
        ),
    )
    p.add_argument("--csv", required=True, help="runs CSV")
    p.add_argument("--fit-json", help="fit JSON from `prism isoflop fit` (recommended: carries the bootstrap bands)")
    p.add_argument("--family", help="keep rows of this family")
    p.add_argument("--regime", default="any", choices=REGIME_CHOICES, help="keep rows of this regime (default: any)")
    p.add_argument("--dpi", type=int, default=150, help="resolution (default: 150)")
    p.add_argument("--outdir", required=True, help="directory for the PNGs")
    p.set_defaults(func=_plot)


def _plot(args: argparse.Namespace) -> int:
    from prism.isoflop.plot import plot_study

    for path in plot_study(args.csv, args.outdir, args.fit_json, args.family, args.regime, args.dpi):
        print(path)
    return 0
