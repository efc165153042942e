#!/usr/bin/env python3
"""bench/lib/loopeff.py: the measuring part of bench/loopback-eff.sh (issue 22, loopback and CPU efficiency).

Runs, interleaved over ROUNDS rounds (order rotated each round so drift on a shared machine hits every case):
  I1/I4  iperf3 memory to memory, 1 and 4 streams (the ceiling of the machine's loopback TCP)
  D1/D4  drsftp copy <- drsftp serve, file to file on /dev/shm, -p 1 (stream mode) and -p 4 (MODE E), CRC32C
         verified as users run it
  G1/G4  globus-url-copy <- globus-gridftp-server, -p 1 and -p 4, file to file on /dev/shm
and with --placement, the same single-stream transfers with both ends pinned to one core (-same) and to two
different cores (-split), to show where the run-to-run spread comes from.

For each run: wall time (process start to exit), the tool's own rate where it reports one (iperf3's receiver,
drsftp's --json), CPU seconds (user + system) of the client (from wait4) and of the server during the run (its
reaped children included: Globus forks one per session), and RSS (VmRSS every 20 ms) of both, peak and mean;
the server's RSS is summed over its process tree. Output: a report on stdout and results.csv in WORK.
"""
import json
import os
import signal
import shutil
import socket
import statistics
import subprocess
import sys
import time

GIB = 1 << 30


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_port(port, proc, what):
    """Waits until something listens on 127.0.0.1:port, from /proc/net/tcp: a probe connection would count as a
    client (iperf3 answers the real one after it with "the server is busy")."""
    want = f"0100007F:{port:04X}"
    for _ in range(200):
        if proc.poll() is not None:
            sys.exit(f"{what} exited at start")
        with open("/proc/net/tcp") as f:
            if any(l.split()[1] == want and l.split()[3] == "0A" for l in list(f)[1:]):
                return
        time.sleep(0.05)
    sys.exit(f"{what} did not listen on {port}")


TCK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid):
    """utime + stime + cutime + cstime of pid, seconds (reaped children included)."""
    with open(f"/proc/{pid}/stat") as f:
        st = f.read()
    fields = st[st.rindex(")") + 2:].split()
    return sum(int(fields[i]) for i in (11, 12, 13, 14)) / TCK


def tree(pid):
    out = [pid]
    i = 0
    while i < len(out):
        try:
            for t in os.listdir(f"/proc/{out[i]}/task"):
                with open(f"/proc/{out[i]}/task/{t}/children") as f:
                    out += [int(c) for c in f.read().split()]
        except OSError:
            pass
        i += 1
    return out


def rss_kib(pids):
    tot = 0
    for p in pids:
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        tot += int(line.split()[1])
        except OSError:
            pass
    return tot


def measure(cmd, server_pid, pin=None):
    """Run cmd; return wall s, client CPU s, server CPU s, RSS samples, stdout."""
    s0 = cpu_s(server_pid)
    t0 = time.monotonic()
    pre = ["taskset", "-c", pin] if pin is not None else []
    p = subprocess.Popen(pre + cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    cs, ss = [], []
    while p.poll() is None:
        cs.append(rss_kib([p.pid]))
        ss.append(rss_kib(tree(server_pid)))
        time.sleep(0.02)
    wall = time.monotonic() - t0
    out, err = p.communicate()
    if p.returncode != 0:
        sys.exit(f"FAILED ({p.returncode}): {' '.join(cmd)}\n{err.decode(errors='replace')}")
    time.sleep(0.3)  # let globus-gridftp-server reap its session child, so its CPU is counted
    srv = cpu_s(server_pid) - s0
    return wall, srv, cs, ss, out.decode(errors="replace")


def client_cpu_of_last_child():
    # Popen reaps the child itself; its rusage shows in RUSAGE_CHILDREN deltas.
    r = os.times()
    return r.children_user + r.children_system


def main():
    # A SIGTERM (timeout, ^C from a wrapper) ends through `finally`, so the servers started here are stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    os.environ["DRSFTP_PASSWORD"] = "bench-pw"  # the drsftp client's password, kept off the command line
    work, bin_, size_mib, rounds, placement = (
        sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5] == "1")
    size = size_mib << 20
    root = os.path.join(work, "root")
    os.makedirs(root, exist_ok=True)
    src = os.path.join(root, "big")
    with open(src, "wb") as f:
        left = size
        while left:
            n = min(left, 64 << 20)
            f.write(os.urandom(n))
            left -= n
    os.chmod(root, 0o777)
    os.chmod(src, 0o644)
    procs = []
    try:
        pd, pg, pi = free_port(), free_port(), free_port()
        d = subprocess.Popen([bin_, "serve", "--listen", f"127.0.0.1:{pd}", "--root", root,
                              "--user", "bench:bench-pw"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(d)
        g = subprocess.Popen(["globus-gridftp-server", "-aa", "-anonymous-user", "nobody", "-p", str(pg),
                              "-control-interface", "127.0.0.1", "-data-interface", "127.0.0.1",
                              "-home-dir", "/", "-l", os.path.join(work, "gftp.log")],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(g)
        i = subprocess.Popen(["iperf3", "-s", "-B", "127.0.0.1", "-p", str(pi)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(i)
        for port, pr, what in ((pd, d, "drsftp serve"), (pg, g, "globus-gridftp-server"), (pi, i, "iperf3 -s")):
            wait_port(port, pr, what)
        out = os.path.join(work, "out")

        def iperf(n):
            return (i.pid, ["iperf3", "-c", "127.0.0.1", "-p", str(pi), "-n", str(size), "-P", str(n), "-J"], False)

        def drsftp(n):
            return (d.pid, [bin_, "copy", "--json", "-p", str(n), f"ftp://bench@127.0.0.1:{pd}/big", out],
                    True)

        def guc(n):
            return (g.pid, ["globus-url-copy", "-p", str(n), f"ftp://127.0.0.1:{pg}{src}", f"file://{out}"], True)

        cases = {"I1": iperf(1), "I4": iperf(4), "D1": drsftp(1), "D4": drsftp(4), "G1": guc(1), "G4": guc(4)}
        names = {"I1": "iperf3 -P 1, memory to memory", "I4": "iperf3 -P 4, memory to memory",
                 "D1": "drsftp copy -p 1 <- drsftp serve", "D4": "drsftp copy -p 4 <- drsftp serve",
                 "G1": "globus-url-copy -p 1 <- globus-gridftp-server",
                 "G4": "globus-url-copy -p 4 <- globus-gridftp-server"}
        pins = {}
        if placement:
            for base in ("I1", "D1"):
                for how, (sc, cc) in (("same", ("0", "0")), ("split", ("0", "1"))):
                    k = f"{base}-{how}"
                    cases[k] = cases[base]
                    pins[k] = (sc, cc)
                    names[k] = f"{names[base]}, both ends on CPU 0" if how == "same" else \
                        f"{names[base]}, server CPU 0, client CPU 1"
        order = list(cases)
        rows = []
        loads = []
        for r in range(rounds):
            for j in range(len(order)):
                k = order[(j + r) % len(order)]
                server, cmd, is_file = cases[k]
                srv_pin, cli_pin = pins.get(k, (None, None))
                if srv_pin is not None:
                    for t in tree(server):
                        subprocess.run(["taskset", "-a", "-p", "-c", srv_pin, str(t)], stdout=subprocess.DEVNULL)
                if os.path.exists(out):
                    os.remove(out)
                c0 = client_cpu_of_last_child()
                wall, srv_cpu, cs, ss, stdout = measure(cmd, server, cli_pin)
                cli_cpu = client_cpu_of_last_child() - c0
                if srv_pin is not None:
                    for t in tree(server):
                        subprocess.run(["taskset", "-a", "-p", "-c", f"0-{os.cpu_count() - 1}", str(t)],
                                       stdout=subprocess.DEVNULL)
                tool_mbps = None
                if k.startswith("I"):
                    tool_mbps = json.loads(stdout)["end"]["sum_received"]["bits_per_second"] / 1e6
                elif k.startswith("D"):
                    tool_mbps = json.loads(stdout.strip().splitlines()[-1])["mbps"]
                if is_file:
                    if os.path.getsize(out) != size or not filecmp(out, src):
                        sys.exit(f"{k}: the copy differs from the source")
                    os.remove(out)
                row = dict(round=r + 1, case=k, wall=wall, mbps_wall=size * 8 / wall / 1e6,
                                 mbps_tool=tool_mbps, cli_cpu=cli_cpu, srv_cpu=srv_cpu,
                                 cli_rss_peak=max(cs, default=0), cli_rss_mean=mean(cs),
                                 srv_rss_peak=max(ss, default=0), srv_rss_mean=mean(ss))
                rows.append(row)
                write_row(os.path.join(work, "results.csv"), row)
                print(f"loopeff: round {r + 1} {k}: {wall:.2f} s, tool {tool_mbps or 0:.0f} Mbit/s, "
                      f"CPU client {cli_cpu:.2f} s server {srv_cpu:.2f} s", file=sys.stderr)
            loads.append(os.getloadavg()[0])
        report(rows, order, names, size, rounds, loads)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()


def write_row(path, row):
    """Appends one run to results.csv (written as runs finish, so an interrupted run keeps what it measured)."""
    new = not os.path.exists(path)
    with open(path, "a") as f:
        if new:
            f.write(",".join(row) + "\n")
        f.write(",".join("" if v is None else (f"{v:.4f}" if isinstance(v, float) else str(v))
                         for v in row.values()) + "\n")


def mean(v):
    return sum(v) / len(v) if v else 0


def filecmp(a, b):
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while True:
            x, y = fa.read(8 << 20), fb.read(8 << 20)
            if x != y:
                return False
            if not x:
                return True


def report(rows, order, names, size, rounds, loads):
    med = statistics.median
    gib = size / GIB
    by = {k: [r for r in rows if r["case"] == k] for k in order}

    def m(k, f):
        v = [r[f] for r in by[k] if r[f] is not None]
        return med(v) if v else None

    print(f"# Loopback efficiency: file to file vs iperf3 memory to memory\n")
    print(f"{size >> 20} MiB per run, files on /dev/shm, {rounds} round(s), cases interleaved (order rotated each "
          f"round); medians. {os.cpu_count()} CPUs; 1-min load average after each round: "
          f"{', '.join(f'{x:.1f}' for x in loads)} (other jobs share the machine: wall-time rates are indicative, "
          f"CPU per GiB is steadier).\n")
    print("| case | wall s | Mbit/s (wall) | Mbit/s (tool) | vs iperf3 (wall) | vs iperf3 (tool) | client CPU s/GiB |"
          " server CPU s/GiB | client RSS peak / mean MiB | server RSS peak / mean MiB |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|---|")
    for k in order:
        base = "I4" if k[1] == "4" else "I1"
        mw, mt = m(k, "mbps_wall"), m(k, "mbps_tool")
        bw, bt = m(base, "mbps_wall"), m(base, "mbps_tool")
        vs_w = f"{mw / bw:.2f}×" if bw else ""
        vs_t = f"{mt / bt:.2f}×" if (mt and bt) else ""
        tool = f"{mt:.0f}" if mt else "–"
        print(f"| {k} {names[k]} | {m(k, 'wall'):.2f} | {mw:.0f} | {tool} | {vs_w} | {vs_t} | "
              f"{m(k, 'cli_cpu') / gib:.2f} | {m(k, 'srv_cpu') / gib:.2f} | "
              f"{max(r['cli_rss_peak'] for r in by[k]) / 1024:.0f} / {m(k, 'cli_rss_mean') / 1024:.0f} | "
              f"{max(r['srv_rss_peak'] for r in by[k]) / 1024:.0f} / {m(k, 'srv_rss_mean') / 1024:.0f} |")
    print("\nWall seconds of every run (spread):\n")
    for k in order:
        print(f"- {k}: " + ", ".join(f"{r['wall']:.2f}" for r in by[k]))
    print("\n'Mbit/s (tool)' is iperf3's receiver rate or drsftp's --json rate (data phase); globus-url-copy reports "
          "none. RSS peak is the largest sample over runs, mean the median of the runs' means; the server's RSS is "
          "summed over its process tree (globus-gridftp-server forks a session process).")


if __name__ == "__main__":
    main()
