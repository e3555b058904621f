"""Loading a partition's segments when its log is opened (Kafka's LogLoader.recoverLog).

Guarantees, given the segments in base-offset order, the checkpointed recovery point and whether
the last shutdown was clean:
- after a clean shutdown nothing is validated: every segment is indexed from its frame headers
  and the recovery point becomes the log end;
- after an unclean shutdown the segments wholly below the recovery point are trusted (indexed
  from their frame headers, their CRCs never checked), and every batch of the segment holding the
  recovery point and of every later segment is validated whole (frame, CRC, offsets increasing);
  at the first batch that fails, its segment is cut there and every later segment is deleted;
  the recovery point becomes min(checkpoint, log end);
- a trusted segment whose frame headers stop chaining (Kafka would not look; here the headers
  are the in-memory index) is cut the same way, and said so at ERROR;
- the result says how many bytes were cut and from which offset on, so the caller can log it and
  rebuild what follows from the log (producer state, transaction index, leader epochs).

Segments are duck-typed (`base_offset`, `recover(expected_next, validate)`, `close()`, `path`),
so this module does not import the log.
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field

log = logging.getLogger(__name__)


@dataclass
class LoadResult:
    segments: list = field(default_factory=list)   # the segments kept, in order
    next_offset: int = 0                          # the log end offset
    recovery_point: int = 0
    bytes_cut: int = 0                            # bytes cut from the segment where recovery stopped
    cut_from_offset: int = -1                     # the first offset no longer in the log (-1: no cut)
    segments_deleted: int = 0                     # later segments deleted after the cut
    segments_validated: int = 0                   # segments whose batches were checked whole


def load_segments(segments: list, recovery_point_checkpoint: int, had_clean_shutdown: bool) -> LoadResult:
    """Index `segments` (each freshly opened, in base-offset order) as LogLoader.recoverLog does."""
    res = LoadResult()
    nxt = segments[0].base_offset if segments else 0
    for idx, seg in enumerate(segments):
        following = segments[idx + 1].base_offset if idx + 1 < len(segments) else None
        # Kafka's segments.values(recoveryPoint, MAX): the segment holding the recovery point and
        # every later one are "unflushed"; a segment ending before the recovery point is trusted
        trusted = had_clean_shutdown or (following is not None and following <= recovery_point_checkpoint)
        expected = max(nxt, seg.base_offset) if idx else seg.base_offset
        nxt, cut = seg.recover(expected, validate=not trusted)
        res.segments.append(seg)
        res.segments_validated += 0 if trusted else 1
        if cut:
            res.bytes_cut, res.cut_from_offset = cut, nxt
            if trusted:
                log.error("%s: the frame headers of a segment %s stop chaining at offset %d: cut there",
                          seg.path, "closed cleanly" if had_clean_shutdown else "below the recovery point", nxt)
            for later in segments[idx + 1:]:
                log.warning("%s: deleting segment %s after the cut at offset %d", os.path.dirname(seg.path),
                            os.path.basename(later.path), nxt)
                later.close()
                os.remove(later.path)
                res.segments_deleted += 1
            break
    res.next_offset = nxt
    if had_clean_shutdown and not res.bytes_cut:
        res.recovery_point = nxt
    else:
        res.recovery_point = min(recovery_point_checkpoint, nxt)
    return res
