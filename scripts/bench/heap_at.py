#!/usr/bin/env python3
"""What a run's heap holds at given seconds, by the line of this project that allocated it.

    heaptrack -o run neardup run ...            # records every allocation (2x slower)
    python3 scripts/bench/heap_at.py run.zst 100,118,135

heaptrack's own tools give the peak, not a given moment; a stage's floor (what stays
allocated between its peaks) is what grows with a corpus, so this replays the trace
(`zstd -dc`, heaptrack's interpreted format: `a` allocation kinds, `+`/`-` allocations and
frees of a kind, `c` the time in ms, `t`/`i`/`s` the call stacks) and, at each second
asked for, adds up the live bytes by the innermost frames in `core/`, `io/`, `dataflow/`
or `src/` (timely's frames, whose paths are relative too, show as `src/` as well). Live
bytes are not resident bytes: a sort's reserved room is live from its first record but
resident only once written (docs/performance.md, eighteenth session).
"""
import collections
import subprocess
import sys


def main():
    path, times = sys.argv[1], [float(x) * 1000 for x in sys.argv[2].split(",")]
    strings, ips, traces, kinds = [None], [None], [None], []
    live = collections.Counter()
    snaps, next_time = {}, 0
    zstd = subprocess.Popen(["zstd", "-dc", path], stdout=subprocess.PIPE, text=True,
                            errors="replace", bufsize=1 << 20)
    for line in zstd.stdout:
        c = line[0]
        if c == "+":
            live[int(line[2:], 16)] += 1
        elif c == "-":
            live[int(line[2:], 16)] -= 1
        elif c == "c":
            now = int(line[2:], 16)
            while next_time < len(times) and now >= times[next_time]:
                snaps[times[next_time]] = +live
                next_time += 1
        elif c == "a":
            size, trace = line[2:].split()
            kinds.append((int(size, 16), int(trace, 16)))
        elif c == "t":
            ip, parent = line[2:].split()
            traces.append((int(ip, 16), int(parent, 16)))
        elif c == "i":
            f = line[2:].split()
            ips.append([(int(f[k], 16), int(f[k + 1], 16), int(f[k + 2], 16))
                        for k in range(2, len(f) - 2, 3)])
        elif c == "s":
            parts = line.rstrip("\n").split(" ", 2)
            strings.append(parts[2] if len(parts) > 2 else "")

    def site(trace):
        frames = []
        while trace:
            ip, parent = traces[trace]
            for _, file, lineno in ips[ip]:
                name = strings[file] if file < len(strings) else "?"
                if name.startswith(("dataflow/", "io/", "core/", "src/")):
                    frames.append(f"{name}:{lineno}")
            trace = parent
        return " < ".join(frames[:4]) or "(outside this project)"

    for at, snap in snaps.items():
        by_site = collections.Counter()
        for kind, n in snap.items():
            size, trace = kinds[kind]
            by_site[site(trace)] += size * n
        print(f"=== {at / 1000:.0f} s: {sum(by_site.values()) >> 20} MB live")
        for where, b in by_site.most_common(25):
            if b >> 20:
                print(f"{b >> 20:6d} MB  {where}")


if __name__ == "__main__":
    main()
