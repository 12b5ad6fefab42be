"""DataOptions: the config's `data:` section (the shard build's and the index's settings).

`seed` and `lm_ratio` are `prism data build`'s flags, `eval_fraction` and
`max_bad_fraction` `prism data index`'s, with the same defaults; `shards` names the
families whose shards are the user's own (indexed instead of built).
"""

from __future__ import annotations

from dataclasses import dataclass

from prism.data.index import EVAL_FRACTION, MAX_BAD_FRACTION
from prism.families import FAMILIES
from prism.options import option


@dataclass(frozen=True)
class DataOptions:
    """The shards of each family (the fields are the config keys of `data:`)."""

    seed: int = option(0, "Seed of the shard build; the same seed gives the same bytes.", minimum=0)
    lm_ratio: float = option(
        0.0,
        "Share of each split that is text-only Python documentation (held-out documents in eval). The default "
        "study uses 0.5: captions alone saturate the smallest backbones and give no IsoFLOP minimum; language "
        "text gives the loss a capacity-limited part, so larger models pay off at larger budgets.",
        minimum=0,
        exclusive_maximum=1,
    )
    shards: dict[str, str] = option(
        {},
        "Your own webdataset shards, per family: an absolute folder of .tar shards (or of train/ and eval/ "
        "folders of them), indexed in place by `prism data index` instead of the offline build "
        "(docs/own-data.md). A family not named here is built.",
        schema={
            "type": "object",
            "propertyNames": {"enum": list(FAMILIES)},
            "additionalProperties": {"type": "string", "pattern": "^/"},
        },
    )
    eval_fraction: float = option(
        EVAL_FRACTION,
        "Share of the samples held out for eval, chosen by the hash of their keys, when a shards folder has no "
        "train/ and eval/ folders.",
        exclusive_minimum=0,
        exclusive_maximum=1,
    )
    max_bad_fraction: float = option(
        MAX_BAD_FRACTION,
        "Bad samples (no caption, an image that does not decode) are skipped with a warning, and the samples a "
        "cut or damaged shard lost count with them; above this share of what the shards should hold, the index "
        "refuses.",
        minimum=0,
        exclusive_maximum=1,
    )
