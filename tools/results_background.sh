#!/usr/bin/env bash
# Run the paper-size steps of `make results` one after another in the background, each under /usr/bin/time -v
# with one VmHWM/VmRSS sample a minute, so that `python tools/results.py --size paper --page-only` can show wall,
# CPU and memory per run (its --logs folder, default runs/results/logs). Every step resumes its run directory,
# so the script can be stopped (kill it, then the step's process) and started again at any time.
#
#   nohup tools/results_background.sh > /dev/null 2>&1 &      # from the repository root, after make install-test
#
# Start it from the shell you work in, without setsid: Linux's autogroup scheduling (kernel.sched_autogroup_enabled)
# shares the CPU between sessions first, so a niced job in a session of its own still took as much CPU as the
# suite beside it (87% of a core against the two pytest workers' 50% and 44%, `top`); inside the same session
# its nice 19 yields to that work.
# The steps are `tools/results.py --print-steps`' (the one list `make results` runs), the embedded model's first
# and Gemma 3's after them (Gemma's Sleight of Word run alone takes many hours on 2 cores), then the page.
# Settings: NICE (default 19), OMP_NUM_THREADS (default 1: on a 2-core machine shared with other work, torch's two
# threads beside one busy core run 10x slower than one thread, docs/benchmarks.md), PASSES (default "first gemma";
# "gemma" skips the embedded model's steps, each of which would otherwise resume and find nothing left to do),
# ONLY (a bash regular expression: run only the steps whose log name matches it, e.g. ONLY=quote).
set -u
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
L=runs/results/logs; R=runs/results; mkdir -p "$L"
step() {
  local name=$1; shift
  echo "$(date -u +%FT%TZ) start $name: $*" >> "$L/chain.log"
  nice -n "${NICE:-19}" /usr/bin/time -v -o "$L/$name.time.tmp" .venv/bin/tamperbench "$@" >> "$L/$name.log" 2>&1 < /dev/null &
  local tp=$! pid=""
  sleep 2; pid=$(pgrep -P "$tp" | head -1); echo "$pid" > "$L/current.pid"
  while kill -0 "$tp" 2>/dev/null; do
    if [ -n "$pid" ] && [ -r "/proc/$pid/status" ]; then
      echo "$(date -u +%FT%TZ) $(grep -E 'VmHWM|VmRSS' "/proc/$pid/status" | tr -s ' \t\n' ' ' | sed 's/ kB//g; s/ *$//')" >> "$L/$name.rss"
    fi
    sleep 60 & wait $!
  done
  wait "$tp"; local rc=$?
  cat "$L/$name.time.tmp" >> "$L/$name.time" 2>/dev/null; rm -f "$L/$name.time.tmp"
  echo "$(date -u +%FT%TZ) end $name rc=$rc" >> "$L/chain.log"
}
.venv/bin/tamperbench models install gemma3-270m >> "$L/chain.log" 2>&1 < /dev/null
mapfile -t steps < <(.venv/bin/python tools/results.py --size paper --runs "$R" --print-steps)
if [ "${#steps[@]}" -eq 0 ]; then echo "$(date -u +%FT%TZ) tools/results.py --print-steps printed no step" >> "$L/chain.log"; exit 1; fi
for pass in ${PASSES:-first gemma}; do
  for line in "${steps[@]}"; do
    case "$line" in *gemma*) [ "$pass" = gemma ] || continue ;; *) [ "$pass" = first ] || continue ;; esac
    IFS=$'\t' read -r -a f <<< "$line"
    if [ -n "${ONLY:-}" ] && ! [[ "${f[0]}" =~ ${ONLY} ]]; then continue; fi
    step "${f[@]}"
  done
done
# the page: with every step run, the full command (it records the steps as done for `make results`); with some
# of them left out (ONLY, PASSES), the page alone: the full command would run the rest here, unniced
if [ -z "${ONLY:-}" ] && [ -z "${PASSES:-}" ]; then page=(); else page=(--page-only); fi
.venv/bin/python tools/results.py --size paper "${page[@]}" >> "$L/chain.log" 2>&1 < /dev/null
