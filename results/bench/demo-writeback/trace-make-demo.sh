#!/bin/bash
# fresh clone, make demo with workqueue + process lifecycle tracing; evidence for round-0 neighbours
set -u
out=$1; mkdir -p $out
rm -rf /tmp/demo-x; git clone -q /work/main /tmp/demo-x
T=/sys/kernel/tracing; [ -d $T/events ] || mount -t tracefs nodev $T
echo 0 > $T/tracing_on; echo > $T/trace; echo 65536 > $T/buffer_size_kb
echo nop > $T/current_tracer
for e in workqueue/workqueue_execute_start sched/sched_process_fork sched/sched_process_exec sched/sched_process_exit; do echo 1 > $T/events/$e/enable; done
cd /tmp/demo-x
grep -E "Dirty|Writeback:" /proc/meminfo > $out/meminfo-start
( while sleep 1; do echo "$(date +%T.%N) $(grep -E '^Dirty' /proc/meminfo)"; done ) > $out/dirty.log &
dp=$!
echo 1 > $T/tracing_on
make -s demo > $out/demo.log 2>&1; echo $? > $out/rc
echo 0 > $T/tracing_on
kill $dp
cp $T/trace $out/trace.txt
for e in workqueue/workqueue_execute_start sched/sched_process_fork sched/sched_process_exec sched/sched_process_exit; do echo 0 > $T/events/$e/enable; done
echo > $T/trace
cp -r /tmp/demo-x/results $out/results
