"""Present: a FitResult and its runs for people (Markdown report, figures, terminal summary, two studies compared,
predictions), and the fit's files (`fitfiles`: the runs CSV in, fit/REGIME.json and its report out); the only
part of the IsoFLOP study that imports matplotlib.
"""
