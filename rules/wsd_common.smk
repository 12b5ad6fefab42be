# Helpers of rules/wsd.smk (functions only; the rules are there).

from prism.isoflop.design.trajectories import plan_trajectories

WSD_COOLDOWN = TRAIN_OPTIONS.cooldown_fraction
POINT_RE = r"[0-9]{8}"
TRAJ_RE = r"[0-9a-z]+-[A-Z0-9]+-[a-z0-9_]+-B[0-9]+"

def wsd_trajectories(family):
    """{traj_id: Trajectory} of the family's planned runs (waits for the plan as `plan_rows` does).

    The warm-up follows the plan's min_steps, never its budgets (`WARMUP`).
    """
    trajs = plan_trajectories({"runs": list(plan_rows(family).values()), "min_steps": PLAN_OPTIONS.min_steps}, WSD_COOLDOWN)
    return {t.traj_id: t for t in trajs}


def wsd_trajectory(wildcards):
    trajs = wsd_trajectories(wildcards.family)
    if wildcards.traj not in trajs:
        raise ValueError(f"trajectory {wildcards.traj!r} is not in the plan; planned: {', '.join(trajs) or 'none'}")
    return trajs[wildcards.traj]


def wsd_run_trajectory(wildcards):
    """The trajectory a planned run branches off."""
    row = plan_row(wildcards)
    for t in wsd_trajectories(wildcards.family).values():
        if any(b.run_id == row["run_id"] for b in t.branches):
            return t
    raise ValueError(f"run {row['run_id']} is in no trajectory")


def segment_dir(family, traj, end):
    return f"{STUDY}/{family}/stable/{traj}/to-{int(end):08d}"


def point_file(family, traj, step):
    return f"{segment_dir(family, traj, step)}/final/keep/step-{int(step):08d}.pt"


def wsd_lost_points(family):
    """Point files that are gone while every job starting from them is finished (its branches, the next
    segment): nothing makes Snakemake put them back, so `study_metrics` says so."""
    lost = []
    for t in wsd_trajectories(family).values():
        for i, p in enumerate(t.points):
            after = [f"{STUDY}/{family}/runs/{b.run_id}/metrics.json" for b in t.branches if b.start == p]
            after += [f"{segment_dir(family, t.traj_id, q)}/metrics.json" for q in t.points[i + 1 : i + 2]]
            if not Path(point_file(family, t.traj_id, p)).is_file() and all(Path(f).is_file() for f in after):
                lost.append(point_file(family, t.traj_id, p))
    return lost


def point_origin(path):
    """(run directory, step) of a point file: what `prism train --init-from --init-step` takes."""
    rundir, name = str(path).split("/final/keep/")
    return rundir, int(name[len("step-") : -len(".pt")])


def recorded_start(rundir):
    """The point a started segment was trained from: (True, point file or None), or (False, None) if never started."""
    path = Path(rundir, "config.yaml")
    if not path.is_file():
        return False, None
    try:
        with open(path) as f:
            recorded = yaml.safe_load(f) or {}
    except (OSError, yaml.YAMLError):
        return False, None
    if not recorded.get("init_from"):
        return True, None
    return True, f"{recorded['init_from']}/final/keep/step-{int(recorded['init_step']):08d}.pt"


def segment_inputs(wildcards):
    t = wsd_trajectory(wildcards)
    inputs = {"data": data_dir(wildcards.family),
              "calibration": calibration_file(wildcards.family, t.backbone, t.variant, t.regime)}
    started, start = recorded_start(segment_dir(wildcards.family, wildcards.traj, wildcards.end))
    if not started:
        previous = t.previous_point(int(wildcards.end))
        start = point_file(wildcards.family, t.traj_id, previous) if previous else None
    if start:
        inputs["start"] = start_input(start)
    force_if_retraining("wsd_segment")
    return inputs


def segment_args(wildcards, input):
    """The segment's `prism train` flags: constant rate after the warm-up to END, kept there."""
    t = wsd_trajectory(wildcards)
    end = int(wildcards.end)
    row = {"family": wildcards.family, "backbone": t.backbone, "variant": t.variant, "regime": t.regime,
           # a segment is a run of its whole prefix's FLOPs (its steps are --max-steps)
           "budget": float(budget_str(end * t.step_flops)), "global_batch": t.global_batch}
    init = {}
    if "start" in input.keys():
        init_from, init_step = point_origin(input.start)
        init = {"init_from": init_from, "init_step": init_step}
    return training_args(row, input.data, segment_dir(wildcards.family, wildcards.traj, end), input.calibration,
                         cooldown_fraction=0.0, warmup=t.warmup, max_steps=end, checkpoint_at=str(end),
                         # A segment's own final loss is one more point of the stable curve, not a result
                         # the fit reads: the intermediate evaluations' sample count is enough for it.
                         final_eval_samples=TRAIN_OPTIONS.eval_samples, **init)


def branch_args(wildcards, input):
    """The branch's `prism train` flags: its plan row as a wsd run, from the point at its cooldown start."""
    t = wsd_run_trajectory(wildcards)
    init_from, init_step = point_origin(input.start)
    return training_args(plan_row(wildcards), input.data, f"{STUDY}/{wildcards.family}/runs/{wildcards.run_id}",
                         input.calibration, warmup=t.warmup, init_from=init_from, init_step=init_step)


def start_input(point):
    """A start point as an input: `ancient` (see rules/wsd.smk), but when retraining, when a rerun
    segment reruns what starts from it."""
    return point if retraining() else ancient(point)


def branch_inputs(wildcards):
    t = wsd_run_trajectory(wildcards)
    force_if_retraining("wsd_branch")
    return {"data": data_dir(wildcards.family),
            "calibration": calibration_file(wildcards.family, t.backbone, t.variant, t.regime),
            "start": start_input(point_file(wildcards.family, t.traj_id, t.branch(wildcards.run_id).start))}


def traj_value(key):
    """A params function: one attribute of the segment's trajectory (a rerun trigger when it changes)."""
    return lambda wildcards: getattr(wsd_trajectory(wildcards), key)


def segment_retrain(wildcards):
    """'1' when retraining (retrain=true, a training rule forced, --forceall) or its point file was forced."""
    return retrain_flag("wsd_segment", point_file(wildcards.family, wildcards.traj, wildcards.end))


def _segment_priority(wildcards):
    """Longest chain of work first (Trajectory.segment_priority); 0 while the plan is pending."""
    try:
        return wsd_trajectory(wildcards).segment_priority(int(wildcards.end))
    except Exception:  # noqa: BLE001
        return 0


def _branch_priority(wildcards):
    try:
        return wsd_run_trajectory(wildcards).branch_priority(plan_row(wildcards)["run_id"])
    except Exception:  # noqa: BLE001
        return 0


def agreement_inputs(wildcards):
    other = config["compare_with"]
    if not other:
        raise ValueError("agreement: set compare_with=<the study dir of a cosine study of the same grid>")
    return {
        "fit": f"{STUDY}/{wildcards.family}/fit/{wildcards.regime}.json",
        "csv": f"{STUDY}/{wildcards.family}/runs.csv",
        "other": f"{other.rstrip('/')}/{wildcards.family}/fit/{wildcards.regime}.json",
    }


# ---- the plan's estimate of each job (its walltime: rules/common.smk) --------------


def step_seconds(t, nodes):
    """Estimated seconds per step of trajectory `t` on `nodes` nodes, as `run_estimate_s` for a run; None if unknown."""
    if t.node_hours_per_step:
        return t.node_hours_per_step * 3600.0 / max(nodes, 1)
    if t.hours_per_step:
        return t.hours_per_step * 3600.0
    return None


def _steps_estimate(t, steps):
    per_step = step_seconds(t, backbone_nodes(t.backbone))
    return None if per_step is None else steps * per_step


def wsd_job_estimate_s(wildcards):
    """A segment's stable steps (from the point it starts at) or a branch's cooldown steps, in seconds."""
    if getattr(wildcards, "traj", None):
        t = wsd_trajectory(wildcards)
        end = int(wildcards.end)
        return _steps_estimate(t, end - t.previous_point(end))
    t = wsd_run_trajectory(wildcards)
    return _steps_estimate(t, t.branch(wildcards.run_id).cooldown)


def wsd_training_jobs(family, rows):
    """(backbone, nodes, estimated seconds) of every segment and branch job of the plan's `rows`."""
    trajs = plan_trajectories({"runs": list(rows.values()), "min_steps": PLAN_OPTIONS.min_steps}, WSD_COOLDOWN)
    jobs = []
    for t in trajs:
        nodes = backbone_nodes(t.backbone)
        jobs += [(t.backbone, nodes, _steps_estimate(t, seg.end - seg.start)) for seg in t.segments]
        jobs += [(t.backbone, nodes, _steps_estimate(t, b.cooldown)) for b in t.branches]
    return jobs
