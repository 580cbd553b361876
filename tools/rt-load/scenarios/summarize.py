#!/usr/bin/env python3
"""Appends one row to a scenario CSV from an rt-load --json summary.

    summarize.py OUT.csv SUMMARY.json key=value...   (extra leading columns)

Columns: the extra keys, then ops_per_s, entities_per_s, p50_ms, p99_ms,
max_ms, answers_503, rate_503, retries, throttled, errors, unsent,
ranges_end. A missing summary (rt-load failed) gives a row of blanks."""
import json
import os
import sys

COLS = ["ops_per_s", "entities_per_s", "p50_ms", "p99_ms", "max_ms",
        "answers_503", "rate_503", "retries", "throttled", "errors",
        "unsent", "ranges_end"]


def main():
    out, summ, extra = sys.argv[1], sys.argv[2], sys.argv[3:]
    keys = [e.split("=", 1)[0] for e in extra]
    vals = [e.split("=", 1)[1] for e in extra]
    row = [""] * len(COLS)
    try:
        with open(summ) as f:
            s = json.load(f)
        a = s["all"]
        lat = a["latency_ms"]
        req = a["requests"] or 1
        if a["ok"] == 0:
            raise KeyError("no successful operation")
        row = ["%.1f" % a["ops_per_s"], "%.1f" % a["entities_per_s"],
               "%.3f" % lat["p50"], "%.3f" % lat["p99"], "%.3f" % lat["max"],
               str(a["answers_503"]), "%.4f" % (a["answers_503"] / req),
               str(a["retries"]), str(a["throttled"]), str(a["errors"]),
               str(s.get("unsent", 0)), str(s.get("ranges_end", -1))]
    except (OSError, ValueError, KeyError):
        try:
            row[9] = str(s["all"]["errors"])  # keep the error count
        except (NameError, KeyError, UnboundLocalError):
            pass
    new = not os.path.exists(out)
    with open(out, "a") as f:
        if new:
            f.write(",".join(keys + COLS) + "\n")
        f.write(",".join(vals + row) + "\n")


if __name__ == "__main__":
    main()
