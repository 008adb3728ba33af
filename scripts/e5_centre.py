"""Writes the e5 embedder's centre vector (``cairn/engine/models/multilingual-e5-small/centre.npy``).

The mean of the model's raw vectors of every turn (as ``passage``) and every question (as
``query``) of Cairn's own multilingual conversations ``multilingual3-*`` and ``multilingual4-*``
(fourteen languages; never LoCoMo). Run from the repository: ``python scripts/e5_centre.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from cairn.engine import e5_model

DATA = Path(e5_model.__file__).parents[1] / "bench" / "data"


def main() -> None:
    model = e5_model.E5Embedder()
    rows = []
    for path in sorted(DATA.glob("multilingual[34]-*.json")):
        conversation = json.loads(path.read_text(encoding="utf-8"))["conversations"][0]
        turns = [
            f"{t['speaker']}: {t['text']}" for s in conversation["sessions"] for t in s["turns"]
        ]
        rows.append(model.raw(turns, query=False))
        rows.append(model.raw([q["question"] for q in conversation["questions"]], query=True))
    centre = np.vstack(rows).mean(axis=0).astype(np.float32)
    np.save(e5_model.CENTRE, centre)
    print(f"{e5_model.CENTRE.name}: the mean of {sum(len(r) for r in rows)} vectors")


if __name__ == "__main__":
    main()
