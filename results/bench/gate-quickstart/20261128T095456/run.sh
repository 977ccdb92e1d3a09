#!/bin/bash
# The README's CI gate recipe, run as written (one machine), from /work/main
cd /work/main
out=/tmp/ci-recipe
rm -rf $out/results; mkdir -p $out/results
for round in 1 2 3; do
  for side in base again budget; do
    set -- scenarios/quickstart.yaml --out "$out/results/$side" --quiet-wait 60
    if [ "$side" = budget ]; then set -- "$@" --set cpus.server_budget_pct=70; fi
    status=0; .venv/bin/wanbench run "$@" --json $out/run.json > /dev/null 2>&1 || status=$?
    echo "round $round $side: exit $status"
    if jq -e .machine_too_busy $out/run.json > /dev/null; then
      echo "machine too busy to judge"; exit 4
    fi
    if [ "$status" -ne 0 ] && [ "$status" -ne 1 ]; then exit "$status"; fi
  done
done
status=0
.venv/bin/wanbench compare $out/results/base/quickstart $out/results/again/quickstart --out $out/aa.md || status=$?
echo "A/A compare: exit $status"
status=0
.venv/bin/wanbench compare $out/results/base/quickstart $out/results/budget/quickstart --force --out $out/ab.md || status=$?
echo "A/B compare: exit $status"
