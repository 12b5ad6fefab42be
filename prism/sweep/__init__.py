"""The per-modality throughput sweep: presets x designs -> one training cell each, padded and packed."""
