#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The checker of scripts/cluster-sim.sh: what was sent against what every
client received.

  cluster-sim-check.py --record FILE --load FIRST-LAST:COUNT [--load ...]

Each --load is one msggen run (sequential uids, --seq): message N of it
went to uid FIRST + N mod (LAST - FIRST + 1); COUNT were sent. The record
is httpclient --record's: "m UID EPOCH:SEQ N" per message received, in
order per uid, and "g UID" per gap told. Prints one JSON object:
  sent, delivered (distinct messages received), lost (sent, never
  received), lost_without_gap (lost, and no gap told at the place where it
  was missing: between the messages received before and after it),
  duplicated (received again), out_of_order (received after a later one),
  gaps (told), unexpected (received but never sent: a checker or sim bug),
  lost_at_end (of lost_without_gap, those after the last message their uid
  received: not arrived when the run ended, rather than missing between two).
"""
import argparse
import bisect
import json
import sys


def parse_load(s):
    rng, count = s.split(":")
    first, last = (int(x) for x in rng.split("-"))
    return first, last, int(count)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--record", required=True)
    ap.add_argument("--load", action="append", type=parse_load, default=[])
    a = ap.parse_args()

    # Expected: per uid, the set of message numbers (loads have disjoint uid ranges
    # or numbers: a number is (load index, n)).
    expected = {}
    for li, (first, last, count) in enumerate(a.load):
        size = last - first + 1
        for n in range(count):
            expected.setdefault(first + n % size, set()).add((li, n))

    def load_of(uid, n):
        for li, (first, last, count) in enumerate(a.load):
            if first <= uid <= last and n < count:
                return li
        return None

    # Per uid: messages in order [(key, gaps_before)], and gap markers.
    msgs, gaps = {}, {}
    with open(a.record, errors="replace") as f:
        for line in f:
            p = line.split()
            if len(p) >= 2 and p[0] == "g":
                gaps[int(p[1])] = gaps.get(int(p[1]), 0) + 1
            elif len(p) == 4 and p[0] == "m":
                uid, n = int(p[1]), int(p[3])
                if n < 0:
                    continue            # not a numbered message (a router check)
                li = load_of(uid, n)
                msgs.setdefault(uid, []).append(((li, n), gaps.get(uid, 0)))

    sent = sum(len(v) for v in expected.values())
    out = dict(sent=sent, delivered=0, lost=0, lost_without_gap=0, duplicated=0,
               out_of_order=0, gaps=sum(gaps.values()), unexpected=0, lost_at_end=0)
    for uid in set(expected) | set(msgs):
        want = expected.get(uid, set())
        got = msgs.get(uid, [])
        seen, pmax, high = set(), [], None
        for key, _ in got:
            if key in seen:
                out["duplicated"] += 1
            elif high is not None and key < high:
                out["out_of_order"] += 1
            seen.add(key)
            if key not in want:
                out["unexpected"] += 1
            high = key if high is None or key > high else high
            pmax.append(high)
        out["delivered"] += len(seen & want)
        total_gaps = gaps.get(uid, 0)
        for key in want - seen:
            out["lost"] += 1
            # The first message received after where it should have come.
            j = bisect.bisect_right(pmax, key)
            before = got[j - 1][1] if j > 0 else 0
            after = got[j][1] if j < len(got) else total_gaps
            if j > 0 and j < len(got):
                told = after - before > 0
            elif j == 0:
                told = after > 0
            else:
                told = total_gaps - got[j - 1][1] > 0
            if not told:
                out["lost_without_gap"] += 1
                out["lost_at_end"] += j == len(got)
    json.dump(out, sys.stdout)
    print()


if __name__ == "__main__":
    main()
