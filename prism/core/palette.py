"""The figures' colours: Okabe-Ito, distinguishable with the common colour-vision deficiencies.

Pure data, so every plotting module (the study's figures, the sweep's bar chart) draws with one
palette in one order without importing another's matplotlib code.
"""

OKABE_ITO: tuple[str, ...] = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")
