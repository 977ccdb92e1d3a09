"""Reproduce cold_hold at N connections with a 0.5 s time series of sockstat, /proc/stat, nstat."""
import json, os, selectors, subprocess, sys, tempfile, time
from pathlib import Path
sys.path.insert(0, os.getcwd())
from clients import LoadSpec, command, parse_result
from harness.servers import ServerConfig, running

N = int(sys.argv[1]); WORKERS = int(sys.argv[2]); extra = sys.argv[3:]
NSTAT = ["ListenOverflows", "ListenDrops", "TCPReqQFullDrop", "TCPReqQFullDoCookies", "SyncookiesSent",
         "SyncookiesRecv", "TCPTimeouts", "TCPSynRetrans", "ActiveOpens", "PassiveOpens", "AttemptFails"]

def snmp():
    out = {}
    for f in ("/proc/net/snmp", "/proc/net/netstat"):
        lines = Path(f).read_text().splitlines()
        for a, b in zip(lines[::2], lines[1::2]):
            for k, v in zip(a.split()[1:], b.split()[1:]):
                out[k] = int(v)
    return out

def sockstat():
    for l in Path("/proc/net/sockstat").read_text().splitlines():
        if l.startswith("TCP:"):
            p = l.split(); return int(p[2]), int(p[8])  # inuse, tw? (format: inuse X orphan Y tw Z alloc A mem M)
def slab_kb():
    return {l.split(':')[0]: int(l.split()[1]) for l in Path('/proc/meminfo').read_text().splitlines() if l.split(':')[0] in ('Slab','MemFree','SUnreclaim')}
def cpus():
    rows = {}
    for l in Path("/proc/stat").read_text().splitlines():
        if l.startswith("cpu") and l[3].isdigit():
            p = l.split(); rows[p[0]] = [int(x) for x in p[1:9]]
    return rows

def schedstat(pid):
    try: return [int(x) for x in Path(f"/proc/{pid}/schedstat").read_text().split()[:2]]
    except OSError: return [0, 0]

def children(pid):
    try: return [int(x) for x in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError: return []

with tempfile.TemporaryDirectory() as tmp:
    cfg = ServerConfig(workers=WORKERS, cpu=(None if os.environ.get("GEN_CPU") == "any" else 0), stats_path=Path(tmp) / "s.json")
    s0 = snmp()
    with running(cfg) as server:
        spec = LoadSpec(generator="sclient", targets=[server.address], cpu=(None if os.environ.get("GEN_CPU") == "any" else 1), cold_conns=N,
                        duration_s=0, warmup_s=0, json_path=os.path.join(tmp, "c.json"))
        argv = command(spec) + extra
        print(" ".join(argv), file=sys.stderr)
        t0 = time.monotonic(); c0 = cpus(); m0 = slab_kb()
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
        series = []
        sel = selectors.DefaultSelector(); sel.register(proc.stdout, selectors.EVENT_READ)
        last = cpus()
        while True:
            ev = sel.select(0.5)
            t = time.monotonic() - t0
            c = cpus(); d = {k: [b - a for a, b in zip(last[k], c[k])] for k in c}; last = c
            inuse = sockstat()
            sn = snmp()
            series.append((round(t, 2), inuse, d["cpu0"], d["cpu1"], sn["ActiveOpens"] - s0["ActiveOpens"], sn["PassiveOpens"]-s0["PassiveOpens"]))
            print(series[-1], file=sys.stderr)
            if ev: break
            if t > 300: raise SystemExit("timeout")
        line = proc.stdout.readline(); t_ready = time.monotonic() - t0
        c1 = cpus(); m1 = slab_kb(); print('meminfo delta kB', {k: m1[k]-m0[k] for k in m0})
        spids = children(server.proc.pid); cpids = children(proc.pid)
        srv_sched = [schedstat(p) for p in spids]; cl_sched = [schedstat(p) for p in cpids]
        held_server = server.snapshot()["connections_current"]
        s1 = snmp()
        proc.terminate(); proc.wait(120)
        doc = parse_result(spec, "", "")
    print("ready line", line.strip(), "t_ready", round(t_ready, 2))
    print("established_s", doc["cold"]["established_s"], "bytes/conn", doc["generator_memory"], "shards", doc["shards"])
    print("server held", held_server)
    tot = {k: [b - a for a, b in zip(c0[k], c1[k])] for k in c0}
    print("cpu ticks user nice sys idle iowait irq softirq", tot)
    print("server workers run/wait s", sum(x[0] for x in srv_sched)/1e9, sum(x[1] for x in srv_sched)/1e9, len(spids)); print("steal", [c1[k][7]-c0[k][7] if len(c1[k])>7 else None for k in c1])
    print("client shards run/wait s", sum(x[0] for x in cl_sched)/1e9, sum(x[1] for x in cl_sched)/1e9, len(cpids))
    print({k: s1.get(k, 0) - s0.get(k, 0) for k in NSTAT})
