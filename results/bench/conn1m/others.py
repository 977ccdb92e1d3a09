import os, sys, subprocess, selectors, tempfile
from pathlib import Path
sys.path.insert(0, os.getcwd())
import scripts.bench_clients as b
from clients import command
from harness.servers import ServerConfig, running
N = int(sys.argv[1])
with tempfile.TemporaryDirectory() as tmp:
    with running(ServerConfig(workers=64, cpu=0, stats_path=Path(tmp)/"s.json")) as server:
        spec = b.load("sclient", server, tmp, cold_conns=N, duration_s=0, warmup_s=0)
        r0 = b.tasks_ran_s()
        proc = subprocess.Popen(command(spec), stdout=subprocess.PIPE, text=True)
        proc.stdout.readline()
        r1 = b.tasks_ran_s()
        ours = {*b.process_tree(server.proc.pid), *b.process_tree(proc.pid)}
        d = sorted(((t - r0.get(k, 0.0), k) for k, t in r1.items() if k[0] not in ours), reverse=True)[:12]
        for dt, (pid, tid) in d:
            try: comm = Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip()
            except OSError: comm = "?"
            print(f"{dt:8.3f} s  {pid}/{tid} {comm}")
        print("ours", sum(t - r0.get(k, 0.0) for k, t in r1.items() if k[0] in ours))
        proc.terminate(); proc.wait()
