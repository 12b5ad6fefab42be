"""The data pipeline: offline sources per family -> webdataset shards -> batches.

`sources/` turns a bundled data set into samples (a modality array and a caption
computed from it), `shards` writes and verifies the shard directory, `loader`
preloads a split and assembles padded or packed batches, `stream` reads a large one from
its shards in DataLoader workers.
"""
