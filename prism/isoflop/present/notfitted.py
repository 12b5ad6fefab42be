"""Why an approach gives no answer, in words a newcomer reads as a check rather than a failure.

An Approach 3 fit that did not converge has numbers (a = 0.000, b = 1.000 on the smoke
study's two budgets) that are no answer: drawn or printed as if they were, they make a
working installation look broken. The summary, the report and the figures say instead
that it is not drawn and why, and, on fewer budgets than the verdict needs, that this is
expected.
"""

from __future__ import annotations


def approach3_answers(a3) -> bool:
    """Whether Approach 3's law is an answer to show (fitted and converged)."""
    return a3 is not None and a3.converged and a3.a is not None and a3.k is not None


def fitted_budgets(fit) -> int:
    """How many budgets the fit had runs of (the per-budget fits of Approach 2, else those it used)."""
    a2 = fit.approach2
    return len(a2.per_budget) if a2 is not None and a2.per_budget else len(fit.diagnostics.budgets_used)


def approach3_not_drawn(a3, n_budgets: int, min_budgets: int) -> str:
    """One sentence: Approach 3 gave no exponent, why (its fit's own note), and, with fewer than `min_budgets`
    budgets, that this is what such a grid gives (the smoke study's two budgets check the pipeline)."""
    text = "no exponent, not drawn: its loss surface L(N, D) did not settle on one fit of these runs"
    if n_budgets < min_budgets:  # the plain reason; the optimiser's own note is in the report
        return text + (
            f"; expected with {n_budgets} budget(s): its five parameters need runs over at least {min_budgets} "
            "budgets, so a grid this small (the smoke study's) checks the pipeline, not the law"
        )
    why = (a3.reason or a3.convergence_note) if a3 is not None else ""
    return text + (f" ({why})" if why else "")
