#!/usr/bin/env bash
# Regenerates results/reference/: small real runs of one reproduction scenario per paper,
# scaled down (fewer points, repetitions and seconds) so the notebooks and plot tests have
# measured data to read. Every number in there comes from these runs; nothing is typed in.
set -euo pipefail
cd "$(dirname "$0")/.."
wanbench=.venv/bin/wanbench
out=results/reference
short=(--set repetitions=2 --set warmup_s=0.5 --set duration_s=2)

rm -rf "$out"
"$wanbench" run scenarios/quickstart.yaml --out "$out"
"$wanbench" run scenarios/bm98-fig9-saturation-vs-cold.yaml --out "$out" "${short[@]}" \
  --set 'sweep.cold.conns=[0, 500, 1000, 2000]'
"$wanbench" run scenarios/bmd99-fig8-reply-rate-vs-cold.yaml --out "$out" "${short[@]}" \
  --set 'sweep.cold.conns=[0, 1000, 2000]'
"$wanbench" run scenarios/cm01-table1-sigio.yaml --out "$out" "${short[@]}" \
  --set 'sweep.hot.rate_rps=[25000, 100000, 175000, 250000]' --set 'sweep.cold.conns=[252]'
"$wanbench" run scenarios/bmd99-fig9-resp-time-vs-rate.yaml --out "$out" "${short[@]}" \
  --set 'sweep.hot.rate_rps=[10000, 40000, 70000, 100000]'
"$wanbench" run scenarios/bmd99-table2-profile.yaml --out "$out" "${short[@]}"
"$wanbench" run scenarios/cm01-fig3-5-vs-connections.yaml --out "$out" "${short[@]}" \
  --set 'sweep.hot.rate_rps=[1000]' --set 'sweep.cold.conns=[200, 1450, 2950]'
"$wanbench" run scenarios/cm01-fig6-9-vs-rate.yaml --out "$out" "${short[@]}" \
  --set 'sweep.server.reply_bytes=[1, 6144]' --set 'sweep.cold.conns=[252, 6000]' \
  --set 'sweep.hot.rate_rps=[2000, 6000, 10000]'
"$wanbench" run scenarios/cpp-fig5-cpp-vs-connections.yaml --out "$out" "${short[@]}" \
  --set 'sweep.stream.conns=[4, 64, 512, 2048]'
"$wanbench" run scenarios/bm98-fig1-select-cpu-vs-cold.yaml --out "$out" "${short[@]}" \
  --set 'sweep.cold.conns=[0, 500, 1000, 2000]'
"$wanbench" run scenarios/bm98-table1-profile.yaml --out "$out" "${short[@]}" --set duration_s=5
"$wanbench" run scenarios/bm98-fig3-6-naive-vs-realistic.yaml --out "$out" "${short[@]}" \
  --set 'sweep.server.reply_bytes=[1259]' \
  --set 'sweep.hot.rate_rps=[4000, 12000, 20000, 28000, 36000]'
"$wanbench" run scenarios/cpp-table1-layers.yaml --out "$out" "${short[@]}" --set duration_s=5
# The Parquet tables hold everything the analysis reads; the raw generator documents and
# the per-point records they were built from would only make the commit larger.
find "$out" -type d \( -name raw -o -name points \) -prune -exec rm -rf {} +
