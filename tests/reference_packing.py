"""Slow, obviously correct packing for the tests: best-fit decreasing with Python lists, and
sequences cut into row-length chunks."""


def best_fit_decreasing(lengths, row_length, windows=None):
    """Rows as lists of positions in ``lengths``, each row's in the order they were put there.

    Per window (``(lo, hi)`` position ranges; default one window of everything), positions
    longest first (ties: the earlier first); each goes to the row with the least room that
    holds it (ties: the earlier row), else to a new row.  A window's rows follow the previous
    window's.
    """
    if windows is None:
        windows = [(0, len(lengths))]
    rows = []
    for lo, hi in windows:
        mine = []
        for k in sorted(range(lo, hi), key=lambda k: (-lengths[k], k)):
            best = None
            for r, row in enumerate(mine):
                room = row_length - sum(lengths[j] for j in row)
                if room >= lengths[k] and (best is None or room < best[0]):
                    best = (room, r)
            if best is None:
                mine.append([k])
            else:
                mine[best[1]].append(k)
        rows.extend(mine)
    return rows


def chunks(lengths, row_length, oversize):
    """The items of packed rows: ``(sequence, start, length)`` per item, sequence by sequence,
    and the sequences dropped; a sequence longer than ``row_length`` is cut into chunks
    (``"split"``) or dropped (``"drop"``)."""
    items, dropped = [], []
    for k, n in enumerate(lengths):
        if n <= row_length:
            items.append((k, 0, n))
        elif oversize == "drop":
            dropped.append(k)
        else:
            for start in range(0, n, row_length):
                items.append((k, start, min(row_length, n - start)))
    return items, dropped
