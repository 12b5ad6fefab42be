"""Fit: runs in, one FitResult out (input checks, Approach 2 and 3, diagnostics and the verdict); pure maths on
records, so a fit is testable without files: prism.isoflop.present.fitfiles reads and writes them.
"""
