#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Checks the --csv and --json files of one pmr-bench run.

Both files must parse and hold a result for every expected variant at every expected size, with
sane statistics (finite, positive, ordered min <= p25 <= median <= p75 <= max), and no pmr variant
may have delivered wrong data, nor any MPI or reference variant: they are what pmr is measured
against. The one exception is a known defect named with --known-wrong (Open MPI 4.1's non-blocking
and persistent neighbourhood collectives swap the two blocks of a periodic dimension of extent 1 or
2): a variant named there may deliver wrong data of that kind only, which is printed. Timings are
never judged.
"""

import argparse
import csv
import json
import math
import sys

STATS = ["min", "p25", "median", "p75", "max"]


def fail(errors, message):
    errors.append(message)


def check_json(path, variants, sizes, samples, known_wrong, errors):
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    for key in ("benchmark", "header", "sizes", "variants", "speedups", "notes"):
        if key not in data:
            fail(errors, f"{path}: key '{key}' missing")
    if data.get("sizes") != sizes:
        fail(errors, f"{path}: sizes {data.get('sizes')} != expected {sizes}")
    names = [v["name"] for v in data.get("variants", [])]
    if sorted(names) != sorted(variants):
        fail(errors, f"{path}: variants {names} != expected {variants}")
    for key in ("mpi", "provider", "cpu", "ranks", "mpi transport"):
        if key not in data.get("header", {}):
            fail(errors, f"{path}: header lacks '{key}'")
    for v in data.get("variants", []):
        results = v.get("results", [])
        got = [r["size_bytes"] for r in results]
        if got != sizes:
            fail(errors, f"{path}: {v['name']} has sizes {got}, expected {sizes}")
        for r in results:
            values = [r[s + "_s"] for s in STATS]
            if any(x is None or not math.isfinite(x) or x <= 0 for x in values):
                fail(errors, f"{path}: {v['name']} at {r['size_bytes']} B: bad times {values}")
            elif values != sorted(values):
                fail(errors, f"{path}: {v['name']} at {r['size_bytes']} B: unordered {values}")
            if v["family"] == "model":
                continue  # predictions: no samples, no iterations
            if samples and r["samples"] != samples:
                fail(errors, f"{path}: {v['name']}: {r['samples']} samples, expected {samples}")
            if r["iterations"] < 1:
                fail(errors, f"{path}: {v['name']}: no iterations")
        if v["verify_failures"]:
            line = f"{v['name']} delivered wrong data: {v['first_failure']}"
            if v["name"] in known_wrong and "(blocks swapped)" in v["first_failure"]:
                print(f"note (known defect): {line}")
            else:
                fail(errors, f"{path}: {line}")
    family = {v["name"]: v["family"] for v in data.get("variants", [])}
    unknown = sorted(n for n, f in family.items() if f not in ("pmr", "mpi", "reference", "model"))
    if unknown:
        fail(errors, f"{path}: variants of unknown family: {unknown}")
    pmr = [v for v in names if family[v] == "pmr"]
    mpi = [v for v in names if family[v] == "mpi"]
    references = [v for v in names if family[v] == "reference"]
    pairs = {(s["pmr"], s["mpi"], s["size_bytes"]) for s in data.get("speedups", [])}
    for p in pmr:
        for m in mpi:
            for size in sizes:
                if (p, m, size) not in pairs:
                    fail(errors, f"{path}: no speed-up of {p} over {m} at {size} B")
    if len(pairs) != len(pmr) * len(mpi) * len(sizes):
        fail(errors, f"{path}: speed-ups of other pairs than pmr over MPI")
    bound = {(b["variant"], b["reference"], b["size_bytes"]): b["time_over_reference"]
             for b in data.get("copy_bound", [])}
    for r in references:
        for v in pmr + mpi:
            for size in sizes:
                ratio = bound.get((v, r, size))
                if ratio is None or not math.isfinite(ratio) or ratio <= 0:
                    fail(errors, f"{path}: no time of {v} over {r} at {size} B")
    return data


def check_csv(path, variants, sizes, errors):
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    seen = set()
    for row in rows:
        key = (row["variant"], int(row["size_bytes"]))
        if key in seen:
            fail(errors, f"{path}: duplicate row {key}")
        seen.add(key)
        for s in STATS:
            x = float(row[s + "_us"])
            if not math.isfinite(x) or x <= 0:
                fail(errors, f"{path}: {key}: {s}_us = {row[s + '_us']}")
        for column in row:
            if column.startswith("speedup_of_"):
                float(row[column])
    expected = {(v, s) for v in variants for s in sizes}
    if seen != expected:
        fail(errors, f"{path}: rows missing {sorted(expected - seen)}, extra {sorted(seen - expected)}")
    for v in variants:
        if v.startswith("pmr") and rows and "speedup_of_" + v not in rows[0]:
            fail(errors, f"{path}: column speedup_of_{v} missing")


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--csv", required=True)
    parser.add_argument("--json", required=True)
    parser.add_argument("--variants", required=True, help="comma-separated expected variants")
    parser.add_argument("--sizes", required=True, help="comma-separated expected sizes in bytes")
    parser.add_argument("--samples", type=int, default=0)
    parser.add_argument("--plot", help="PNG file that must exist")
    parser.add_argument("--known-wrong", default="",
                        help="comma-separated variants whose blocks may arrive swapped")
    args = parser.parse_args()

    variants = [v for v in args.variants.split(",") if v]
    sizes = [int(s) for s in args.sizes.split(",") if s]
    errors = []
    try:
        known_wrong = {v for v in args.known_wrong.split(",") if v}
        check_json(args.json, variants, sizes, args.samples, known_wrong, errors)
        check_csv(args.csv, variants, sizes, errors)
        if args.plot:
            with open(args.plot, "rb") as f:
                if f.read(8) != b"\x89PNG\r\n\x1a\n":
                    fail(errors, f"{args.plot} is not a PNG file")
    except (OSError, ValueError, KeyError, TypeError) as e:
        fail(errors, f"cannot read the results: {type(e).__name__}: {e}")
    for e in errors:
        print("FAILED:", e)
    if errors:
        return 1
    print(f"results OK: {len(variants)} variants x {len(sizes)} sizes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
