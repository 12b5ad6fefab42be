"""Design: what a study trains and whether it can answer, decided before any run (calibrate, ladder, plan, forecast,
gate, wsd trajectories); named for the stage, so that `design.plan` is the plan and not a second `plan.plan`.
"""
