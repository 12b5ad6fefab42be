"""Present: a FitResult and its runs for people (Markdown report, figures, terminal summary, two studies compared);
the only part of the IsoFLOP study that imports matplotlib.
"""
