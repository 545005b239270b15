#!/usr/bin/env python3
"""Prints one comparison table per collective from a bench/run-host-bench.sh
output directory, and writes DIR/combined.csv.

Inputs in DIR:
  plugboard_allreduce.csv, plugboard_allgather.csv   (plugboard-perf --csv)
  gloo.csv, openmpi.csv   (library,collective,nranks,size_bytes,time_us)
  meta.txt (optional, key=value lines printed as the header)
  plugboard_*.txt (optional: plugboard-perf's output, for the transport it used)

Plugboard's out-of-place time is compared. Size conventions are plugboard-perf's
(allgather size = total gathered bytes). busbw (GB/s) = size / time * factor,
factor 2(n-1)/n for allreduce and (n-1)/n for allgather.

usage: compare.py DIR
"""
import csv
import math
import os
import re
import sys

LIBS = ("plugboard", "gloo", "openmpi")
COLLECTIVES = ("allreduce", "allgather")
LARGE = 1 << 20  # >= 1 MiB: compare bus bandwidth
SMALL = 4 << 10  # <= 4 KiB: compare latency


def bus_factor(collective, n):
    return 2.0 * (n - 1) / n if collective == "allreduce" else (n - 1) / n


def busbw(collective, n, size, us):
    return size / (us * 1e3) * bus_factor(collective, n) if us > 0 else 0.0


def read_rows(path):
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def load(d):
    """{(collective, size): {lib: time_us}}, nranks seen, problems."""
    times, nranks, problems = {}, set(), []
    for c in COLLECTIVES:
        path = os.path.join(d, f"plugboard_{c}.csv")
        rows = read_rows(path)
        if not rows:
            problems.append(f"no Plugboard {c} results ({os.path.basename(path)})")
        for r in rows:
            size = int(r["size_bytes"])
            if size == 0:  # too small to split over the ranks: nothing moved
                continue
            if int(r["oop_wrong"]) or int(r["ip_wrong"]):
                problems.append(f"Plugboard {c} {size} B reported wrong values")
            nranks.add(int(r["nranks"]))
            times.setdefault((c, size), {})["plugboard"] = float(r["oop_time_us"])
    for lib in ("gloo", "openmpi"):
        rows = read_rows(os.path.join(d, f"{lib}.csv"))
        skipped = os.path.join(d, f"{lib}.skipped")
        if not rows and os.path.exists(skipped):
            with open(skipped) as f:
                print(f"# {lib}: not run ({f.read().strip()})")
        elif not rows:
            problems.append(f"no {lib} results ({lib}.csv)")
        for r in rows:
            nranks.add(int(r["nranks"]))
            times.setdefault((r["collective"], int(r["size_bytes"])), {})[lib] = float(r["time_us"])
    return times, nranks, problems


def human(size):
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return f"{size >> shift}{unit}"
    return str(size)


def geomean(values):
    values = [v for v in values if v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def ratio_text(r, faster_when_below_one=True):
    if r is None:
        return "n/a"
    if faster_when_below_one:  # time ratio
        verdict = "faster" if r < 1 else "slower"
        factor = 1 / r if r < 1 else r
    else:  # bandwidth ratio
        verdict = "faster" if r > 1 else "slower"
        factor = r if r > 1 else 1 / r
    return f"{r:.2f} (Plugboard {factor:.2f}x {verdict})"


def fmt_time(us):
    return "-" if us is None else (f"{us:.1f}" if us < 1e4 else f"{us:.0f}")


def fmt_ratio(a, b):
    return "-" if a is None or b is None or b <= 0 else f"{a / b:.2f}"


def fmt_bw(bw):
    return "-" if bw is None else f"{bw:.3f}"


def transports(d):
    found = set()
    for c in COLLECTIVES:
        path = os.path.join(d, f"plugboard_{c}.txt")
        if os.path.exists(path):
            with open(path, errors="replace") as f:
                found.update(re.findall(r"^#\s+rank \d+ -> rank \d+ via (\S+)", f.read(), re.M))
    return sorted(found)


def main(argv):
    if len(argv) != 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(argv) == 2 else 2
    d = argv[1]
    times, nranks_seen, problems = load(d)
    if len(nranks_seen) > 1:
        problems.append(f"results mix rank counts {sorted(nranks_seen)}")
    n = max(nranks_seen) if nranks_seen else 0

    meta = os.path.join(d, "meta.txt")
    if os.path.exists(meta):
        with open(meta) as f:
            for line in f:
                if line.strip():
                    print("# " + line.rstrip())
    pb_via = ", ".join(transports(d)) or "unknown"
    print(f"# all three over TCP loopback: Plugboard ethernet plugin (plugboard-perf reports: via {pb_via}),")
    print("#   Gloo tcp transport on 127.0.0.1, Open MPI pml ob1 + btl tcp,self on lo (no shared memory).")
    print("# time = mean us per call, averaged over ranks; Plugboard out-of-place. pb/x = Plugboard time / x time")
    print("#   (< 1: Plugboard faster). busbw GB/s: allreduce size/time*2(n-1)/n, allgather size/time*(n-1)/n;")
    print("#   allgather size = total gathered bytes.")

    combined = []
    for c in COLLECTIVES:
        sizes = sorted(s for (cc, s) in times if cc == c)
        if not sizes:
            continue
        print()
        print(f"## {c}, {n} ranks, float{' sum' if c == 'allreduce' else ''}")
        head = ("size", "plugboard us", "gloo us", "openmpi us", "pb/gloo", "pb/mpi",
                "pb busbw", "gloo busbw", "mpi busbw")
        widths = (10, 13, 11, 11, 8, 8, 9, 11, 10)
        print("".join(h.rjust(w) for h, w in zip(head, widths)))
        large = {"gloo": [], "openmpi": []}
        small = {"gloo": [], "openmpi": [], "best": []}
        for s in sizes:
            t = times[(c, s)]
            pb, gl, mp = (t.get(lib) for lib in LIBS)
            bw = {lib: (busbw(c, n, s, t[lib]) if lib in t else None) for lib in LIBS}
            cells = (human(s), fmt_time(pb), fmt_time(gl), fmt_time(mp), fmt_ratio(pb, gl), fmt_ratio(pb, mp),
                     fmt_bw(bw["plugboard"]), fmt_bw(bw["gloo"]), fmt_bw(bw["openmpi"]))
            print("".join(x.rjust(w) for x, w in zip(cells, widths)))
            for lib in LIBS:
                if lib in t:
                    combined.append((lib, c, n, s, t[lib], bw[lib]))
            if pb is None:
                continue
            for lib in ("gloo", "openmpi"):
                if lib not in t or t[lib] <= 0:
                    continue
                if s >= LARGE and bw[lib] > 0:
                    large[lib].append(bw["plugboard"] / bw[lib])
                if s <= SMALL:
                    small[lib].append(pb / t[lib])
            others = [t[lib] for lib in ("gloo", "openmpi") if t.get(lib, 0) > 0]
            if s <= SMALL and others:
                small["best"].append(pb / min(others))
        print(f"# {c} large (>= {human(LARGE)}) Plugboard busbw / other busbw, geomean (> 1: Plugboard faster):")
        for lib in ("gloo", "openmpi"):
            g = geomean(large[lib])
            print(f"#   vs {lib:8s} {ratio_text(g, faster_when_below_one=False)}  over {len(large[lib])} sizes")
        print(f"# {c} small (<= {human(SMALL)}) Plugboard time / other time, geomean (< 1: Plugboard faster):")
        for lib in ("gloo", "openmpi"):
            g = geomean(small[lib])
            print(f"#   vs {lib:8s} {ratio_text(g)}  over {len(small[lib])} sizes")
        g = geomean(small["best"])
        print(f"#   vs the faster of the two at each size: {ratio_text(g)}  over {len(small['best'])} sizes")

    with open(os.path.join(d, "combined.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(("library", "collective", "nranks", "size_bytes", "time_us", "busbw_gbs"))
        for lib, c, nr, s, us, bw in combined:
            w.writerow((lib, c, nr, s, f"{us:.3f}", f"{bw:.6f}"))

    if problems:
        print()
        for p in problems:
            print("# WARNING: " + p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
