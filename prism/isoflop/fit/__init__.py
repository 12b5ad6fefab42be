"""Fit: runs in, one FitResult out (input checks, Approach 2 and 3, diagnostics and the verdict); pure maths on
records, so a fit is testable without files: `fit.fit_csv` is the one call that reads and writes them.
"""
