"""Fusing calibrated lane scores into one score in [0, 1] (``cairn.engine.search``)."""

from __future__ import annotations

from collections.abc import Collection, Sequence


def fuse(
    scores: dict[str, dict[int, float]],
    lanes: Sequence[str],
    weights: dict[str, float],
    method: str = "weighted",
    unseen: dict[str, Collection[int]] | None = None,
) -> dict[int, float]:
    """Combine calibrated lane scores into one score in [0, 1].

    ``weighted``: weighted mean of the calibrated scores. ``minmax``: the same after scaling
    each lane by its best score of this query (lanes on different scales weigh as meant).
    ``rrf``: weighted reciprocal-rank fusion (k = 60), scaled so rank 1 in every lane is 1.

    ``unseen`` names, per lane, memories that lane could not score at all (a memory whose
    vector is not written yet): for those the mean is over the other lanes only, so a memory
    is not ranked below its peers for a lane that never looked at it (``rrf`` ignores it).
    """
    total_w = sum(weights.get(lane, 0.0) for lane in lanes) or 1.0
    fused: dict[int, float] = {}
    for lane in lanes:
        w = weights.get(lane, 0.0) / total_w
        lane_scores = scores[lane]
        if method == "rrf":
            ranked = sorted(lane_scores, key=lambda seq: (-lane_scores[seq], seq))
            for rank, seq in enumerate(ranked):
                fused[seq] = fused.get(seq, 0.0) + w * 61.0 / (61.0 + rank)
            continue
        top = max(lane_scores.values(), default=0.0)
        scale = 1.0 / top if method == "minmax" and top > 0 else 1.0
        for seq, s in lane_scores.items():
            fused[seq] = fused.get(seq, 0.0) + w * s * scale
    if method == "rrf" or not unseen or not any(unseen.values()):
        return fused
    for seq in fused:
        blind = [lane for lane in lanes if seq in unseen.get(lane, ())]
        if blind:
            seen_w = sum(weights.get(lane, 0.0) for lane in lanes if lane not in blind)
            if seen_w > 0:
                fused[seq] *= total_w / seen_w
    return fused
