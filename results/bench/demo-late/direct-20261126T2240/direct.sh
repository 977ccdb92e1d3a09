#!/bin/bash
# select at 5,000 idle, as the quickstart point, without the Python runner: N repetitions.
# usage: direct.sh OUTDIR N [extra hot args]
B=/work/wt-demo/build/bin; out=$1; n=$2; shift 2; mkdir -p $out
for i in $(seq 1 $n); do
  port=$((18080 + i))
  $B/wb-server --dispatch select --accept multi --reply-bytes 92 --listen 127.0.0.1:$port --cpu 0 >$out/server-$i.log 2>&1 &
  srv=$!; sleep 0.3
  $B/wb-sclient --target 127.0.0.1:$port --cold 5000 --cold-ramp 20000 --duration 0 --cpu 1 --source 127.0.1.1,127.0.1.2,127.0.1.3,127.0.1.4,127.0.1.5,127.0.1.6,127.0.1.7,127.0.1.8 >$out/cold-$i.out 2>&1 &
  cold=$!
  for t in $(seq 1 100); do grep -q cold_ready $out/cold-$i.out && break; sleep 0.1; done
  $B/wb-sclient --target 127.0.0.1:$port --hot-conns 50 --rate 40000 --duration 3 --warmup 1 --cpu 1 --late-us 1000 --json $out/hot-$i.json "$@" >/dev/null 2>$out/hot-$i.err
  kill -TERM $cold; wait $cold 2>/dev/null; kill -TERM $srv; wait $srv 2>/dev/null
  python3 -c "
import json,sys; d=json.load(open('$out/hot-$i.json')); s=d['schedule']
print('rep $i late', d['late_sends'], 'of', d['requests']['scheduled'], 'replies/s %.0f'%d['reply_rate_rps'], 'cpu', d['generator_cpu'], 'contended_s', s['contended_s'], 'lead', s['lead_us'], 'wake_late', s['wake_late'], 'timeline_late', [e.get('late') for e in d['timeline']])"
done
