#!/usr/bin/env python3
"""Inputs in an object store (issue 33): `neardup run` over local files against the same
files read from an S3 server on loopback, directly and through a proxy that delays every
request, as a store across a network would.

    python3 scripts/bench/store.py --neardup target/release/neardup --data DIR \
        [--server target/tools/bin/s3s-fs] [--workers 2] [--runs 5] [--delay-ms 0,20,50] \
        [--modes simhash,threshold] [--write-dedup] [--json results.json]

DIR is a directory of input files (for example the scaling benchmark's corpus of dev-medium
in 16 shards: `scripts/bench/scaling.py` writes it to WORK/corpus-1x16). The server is
s3s-fs, which `scripts/test.sh` installs into the target directory; it serves DIR as the
bucket `corpus`, uploaded with S3 PUTs (curl's SigV4 signing) into a scratch directory.

Each round runs, for each mode: the local run, the run of the local files with its output
written to the store (`--output s3://out/run/`, uploaded as each file is committed; docs/
outputs.md, "Outputs in an object store"), then the run from `s3://corpus/` with each
delay (0: straight to the server; D > 0: through a proxy that holds every request D ms
before passing it on). It prints the medians: wall seconds, the ratio to the local run, and
the server's CPU seconds (user + system, from /proc) over the run, which on a machine of few
cores competes with neardup for them. Every run must report the local run's pairs. It also
measures the server's own ceiling: curl GETting every object, as many at a time as workers,
with nothing done with the bytes.

With `--write-dedup`, every run also writes the deduplicated corpus (about the size of the
input): beside its output on disk, and to `s3://out/dedup/` for the run whose output goes
to the store, so that the uploads weigh as much as the reads.

The question it answers: does reading from a store cost more than the bytes it moves? With
ranged GETs of 8 MiB and the next block in flight (io/src/store.rs), a delay of D ms per
request should add little to a run of many blocks per worker.
"""
import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODES = {
    "simhash": [],
    "threshold": ["--method", "minhash", "--threshold", "0.8", "--verify", "jaccard"],
}
ACCESS, SECRET = "bench", "bench-secret"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port, seconds=20):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"nothing listens on port {port}")


def cpu_seconds(pid):
    """User + system CPU seconds of a process so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def delay_proxy(upstream, delay):
    """A TCP proxy on loopback that holds each chunk from a client `delay` seconds before
    passing it to `upstream` (a request head is one chunk: each request waits once)."""
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)

    def pump(src, dst, wait):
        try:
            while True:
                data = src.recv(1 << 16)
                if not data:
                    break
                if wait:
                    time.sleep(wait)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def accept():
        while True:
            client, _ = listener.accept()
            up = socket.create_connection(("127.0.0.1", upstream))
            for s in (client, up):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=pump, args=(client, up, delay), daemon=True).start()
            threading.Thread(target=pump, args=(up, client, 0), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return listener.getsockname()[1]


def upload(data, port):
    """Puts every file under `data` into the bucket `corpus` with S3 PUTs (curl's SigV4), as
    a user's upload would: the server then keeps each object's ETag, where files copied into
    its directory would have it computed again over the whole file at every ranged GET."""
    def put(path, body=None):
        cmd = ["curl", "-sf", "-X", "PUT", "--aws-sigv4", "aws:amz:us-east-1:s3",
               "--user", f"{ACCESS}:{SECRET}", "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD",
               f"http://127.0.0.1:{port}/{path}"]
        if body:
            cmd[1:1] = ["-T", body]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    put("corpus")
    for folder, _, names in os.walk(data):
        for name in sorted(names):
            full = os.path.join(folder, name)
            put("corpus/" + os.path.relpath(full, data), full)


def server_ceiling(data, port, streams):
    """Seconds for curl to GET every object of the bucket, `streams` at a time: what the
    server itself delivers, with no parsing or hashing at all."""
    names = sorted(os.path.relpath(os.path.join(f, n), data)
                   for f, _, ns in os.walk(data) for n in ns)
    queue = list(names)
    lock = threading.Lock()

    def fetch():
        while True:
            with lock:
                if not queue:
                    return
                name = queue.pop()
            subprocess.run(["curl", "-sf", "--aws-sigv4", "aws:amz:us-east-1:s3", "--user",
                            f"{ACCESS}:{SECRET}", "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD",
                            "-o", "/dev/null", f"http://127.0.0.1:{port}/corpus/{name}"],
                           check=True)
    t0 = time.perf_counter()
    threads = [threading.Thread(target=fetch) for _ in range(streams)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - t0


def run(opts, mode, inputs, out, env, server_pid, out_url=None):
    """One run; `out_url`: its output goes to that store URL, which the server keeps in
    the local directory `out`."""
    shutil.rmtree(out, ignore_errors=True)
    cmd = [opts.neardup, "run", "-q", "-w", str(opts.workers), "--output", out_url or out,
           *MODES[mode], inputs]
    if opts.write_dedup:
        dedup = out + "-dedup"
        shutil.rmtree(dedup, ignore_errors=True)
        cmd += ["--write-dedup", out_url.rstrip("/") + "-dedup/" if out_url else dedup]
    cpu0 = cpu_seconds(server_pid)
    t0 = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{done.stderr}")
    with open(os.path.join(out, "summary.json")) as f:
        summary = json.load(f)
    return {
        "wall": wall,
        "server_cpu": cpu_seconds(server_pid) - cpu0,
        "pairs": summary["counts"]["pairs"],
        "retries": summary.get("store_retries", 0),
        "text_bytes": summary["counts"]["bytes"],
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--neardup", default=os.path.join(ROOT, "target/release/neardup"))
    p.add_argument("--data", required=True)
    p.add_argument("--server", default=os.path.join(ROOT, "target/tools/bin/s3s-fs"))
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--delay-ms", default="0,20,50")
    p.add_argument("--modes", default="simhash,threshold")
    p.add_argument("--write-dedup", action="store_true")
    p.add_argument("--json")
    opts = p.parse_args()
    delays = [int(d) for d in opts.delay_ms.split(",")]
    modes = opts.modes.split(",")

    scratch = tempfile.mkdtemp(prefix="neardup-store-bench-")
    bucket_root = os.path.join(scratch, "root")
    os.makedirs(os.path.join(bucket_root, "out"))
    port = free_port()
    server = subprocess.Popen(
        [opts.server, "--host", "127.0.0.1", "--port", str(port), "--access-key", ACCESS,
         "--secret-key", SECRET, bucket_root],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_listening(port)
        upload(opts.data, port)
        ports = {0: port, **{d: delay_proxy(port, d / 1000) for d in delays if d > 0}}
        base_env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        store_env = lambda d: {
            **base_env,
            "AWS_ENDPOINT_URL": f"http://127.0.0.1:{ports[d]}",
            "AWS_ALLOW_HTTP": "true",
            "AWS_ACCESS_KEY_ID": ACCESS,
            "AWS_SECRET_ACCESS_KEY": SECRET,
            "AWS_REGION": "us-east-1",
        }
        local_out = os.path.join(scratch, "out")
        store_out = os.path.join(bucket_root, "out", "run")
        results = {}
        for r in range(opts.runs):
            for mode in modes:
                configs = [("local", opts.data, base_env, local_out, None),
                           ("output to s3", opts.data, store_env(0), store_out, "s3://out/run/")]
                configs += [(f"s3, +{d} ms" if d else "s3", "s3://corpus/", store_env(d),
                             local_out, None) for d in delays]
                for name, inputs, env, out, url in configs:
                    got = run(opts, mode, inputs, out, env, server.pid, url)
                    results.setdefault((mode, name), []).append(got)
            results.setdefault(("server", "curl"), []).append(
                {"wall": server_ceiling(opts.data, port, opts.workers)})
            report(results, r + 1, opts)
    finally:
        server.kill()
        shutil.rmtree(scratch, ignore_errors=True)


def report(results, rounds, opts):
    print(f"\nafter {rounds} round(s), {opts.workers} workers, medians:")
    print(f"{'mode':10} {'inputs':14} {'wall s':>8} {'ratio':>7} {'GB/s':>6} {'server CPU s':>13} {'retries':>8}")
    rows = []
    ceiling = statistics.median(x["wall"] for x in results[("server", "curl")])
    print(f"the server's ceiling: curl GETs every object, {opts.workers} at a time, in "
          f"{ceiling:.2f} s")
    for (mode, name), runs in results.items():
        if mode == "server":
            continue
        local = statistics.median(x["wall"] for x in results[(mode, "local")])
        wall = statistics.median(x["wall"] for x in runs)
        pairs = {x["pairs"] for x in runs} | {x["pairs"] for x in results[(mode, "local")]}
        if len(pairs) != 1:
            sys.exit(f"{mode} {name}: pairs differ from the local run's: {sorted(pairs)}")
        row = {
            "mode": mode, "inputs": name, "wall_s": wall, "ratio": wall / local,
            "gb_per_s": runs[0]["text_bytes"] / wall / 1e9,
            "server_cpu_s": statistics.median(x["server_cpu"] for x in runs),
            "retries": max(x["retries"] for x in runs), "runs": len(runs),
        }
        row["server_ceiling_s"] = ceiling
        rows.append(row)
        print(f"{mode:10} {name:14} {wall:8.2f} {row['ratio']:6.2f}x {row['gb_per_s']:6.3f} "
              f"{row['server_cpu_s']:13.2f} {row['retries']:8}")
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
