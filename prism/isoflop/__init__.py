"""IsoFLOP study, one subpackage per stage: design (before training), runs, fit, present.

`records` (the plain records every stage passes on), `planread` and `synthetic` (studies with a known truth)
are shared by all. The subpackages are layers, bottom to top: fit (maths on records; the design's forecast
fits simulated studies), design, runs, present (tests/test_layers.py).
"""
