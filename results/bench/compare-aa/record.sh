#!/bin/sh
# Records the runs under results/bench/compare-aa/ (docs/compare.md, "Validation on real runs"):
# the quickstart as it is, run after run on a machine shared with other jobs (A/A: aa/), some
# runs with a CPU hog started on the server's CPU for part of the run, and among them runs
# with the server held to 70 % of its CPU (A/B: budget70/). Keeps each run's manifest.json
# and points.parquet; hogs.csv says which runs had the hog, and when. Each run waits for a
# minute whose load average is below CALM (other engineers' test suites on this 2-CPU machine
# drove it to 10, and every point of every run was then invalid: not what an A/A pair tests).
# Usage (from the repository root): sh results/bench/compare-aa/record.sh [RUNS] [CALM]
set -eu
WANBENCH=${WANBENCH:-.venv/bin/wanbench}
RUNS=${1:-27}
CALM=${2:-2.5}
OUT=results/bench/compare-aa
STAGE=$(mktemp -d)
if [ -f "$OUT/hogs.csv" ]; then  # a later batch adds to what is there
    cp "$OUT/hogs.csv" "$OUT/hogs.csv.new"
else
    echo "run_id,kind,hog_from_s,hog_for_s" > "$OUT/hogs.csv.new"
fi
i=1
while [ "$i" -le "$RUNS" ]; do
    kind=aa; set=""
    [ $((i % 7)) -eq 0 ] && { kind=budget70; set="--set cpus.server_budget_pct=70"; }
    hog=no
    [ "$kind" = aa ] && [ $((i % 4)) -eq 3 ] && hog=yes
    while awk -v calm="$CALM" '{ exit !($1 > calm) }' /proc/loadavg; do sleep 20; done
    # shellcheck disable=SC2086  # $set is one option and its value, or nothing
    $WANBENCH run scenarios/quickstart.yaml --out "$STAGE/$kind" $set >"$STAGE/run$i.log" 2>&1 &
    run=$!
    if [ "$hog" = yes ]; then
        sleep 20
        taskset -c 0 sh -c 'while :; do :; done' &
        spin=$!
        sleep 25
        kill "$spin"
    fi
    wait "$run" || true  # exit 1: some points invalid, which is part of what is recorded
    dir=$(ls -dt "$STAGE/$kind"/quickstart/*/ | head -n 1)
    id=$(basename "$dir")
    mkdir -p "$OUT/$kind/quickstart/$id"
    cp "$dir/manifest.json" "$dir/points.parquet" "$OUT/$kind/quickstart/$id/"
    if [ "$hog" = yes ]; then echo "$id,$kind,20,25"; else echo "$id,$kind,,"; fi \
        >> "$OUT/hogs.csv.new"
    echo "$(date -u +%H:%M:%S) run $i/$RUNS $kind hog=$hog $id"
    sleep $((20 + i * 7 % 40))
    i=$((i + 1))
done
mv "$OUT/hogs.csv.new" "$OUT/hogs.csv"
rm -rf "$STAGE"
