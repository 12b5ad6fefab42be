"""IsoFLOP study, one subpackage per stage: design (before training), runs, fit, present.

`records` (the plain records every stage passes on) and `synthetic` (studies with a known truth) are shared by all.
"""
