"""The tiny run settings, shard fixture and `prism train` runner of tests/train, shared."""

from train.conftest import TINY, run_prism, shards, train  # noqa: F401
