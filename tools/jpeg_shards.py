#!/usr/bin/env python3
"""Write webdataset shards as img2dataset writes them (KEY.jpg, KEY.txt, KEY.json) of photo-like JPEGs.

    python tools/jpeg_shards.py OUT --samples 4000 --per-shard 1000 --size 256

For measuring the streaming loader at a realistic image size (`prism data bench --stream`) without
downloading anything: smooth gradients with noise, 256x256 at JPEG quality 90 by default, about what
img2dataset's resized photos cost to decode. Deterministic for a seed.
"""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path

import numpy as np
from PIL import Image

from prism.data.tarwriter import write_tar


def jpeg(rng: np.random.Generator, size: int, quality: int) -> bytes:
    y, x = np.mgrid[0:size, 0:size] * (224 / size)
    a, b, c = rng.uniform(0.2, 1.0, 3)
    image = np.stack([x * a, y * b, (x + y) * c / 2], axis=-1) + rng.normal(0, 12, (size, size, 3))
    buf = io.BytesIO()
    Image.fromarray(np.clip(image, 0, 255).astype(np.uint8)).save(buf, format="JPEG", quality=quality)
    return buf.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="folder of the shards (created)")
    parser.add_argument("--samples", type=int, default=4000)
    parser.add_argument("--per-shard", type=int, default=1000)
    parser.add_argument("--size", type=int, default=256, help="image side in pixels")
    parser.add_argument("--quality", type=int, default=90)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    for first in range(0, args.samples, args.per_shard):
        members = []
        for i in range(first, min(args.samples, first + args.per_shard)):
            caption = f"a photo number {i} with a colour gradient"
            meta = json.dumps({"caption": caption, "width": args.size, "height": args.size, "status": "success"})
            key = f"{i:09d}"
            members += [(f"{key}.jpg", jpeg(rng, args.size, args.quality)), (f"{key}.txt", caption.encode())]
            members.append((f"{key}.json", meta.encode()))
        with open(args.out / f"{first // args.per_shard:05d}.tar", "wb") as fh:
            write_tar(fh, members)


if __name__ == "__main__":
    main()
