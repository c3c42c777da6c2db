#!/usr/bin/env bash
# Data parallelism across hosts, as docs/distributed.md ("Several machines") describes it, tried on one
# machine (ctest: "distributed mpi: hosts (netns)"). Three hosts are network namespaces, each with its
# own address on a bridge that lives in a fourth namespace, the launcher, where mpirun runs; Open MPI
# starts its daemon on each host through a small agent (`ip netns exec HOST`) in place of ssh, and the
# ranks talk over TCP only (no shared memory: these hosts share one kernel, and shared memory would
# bypass the network the test cuts). It checks:
#   1. mpirun --hostfile across the three hosts trains the model one process trains: the same losses
#      and every float64 value of the checkpoint (weights and optimizer state) within 1e-12;
#   1b. a study (relgrad length-bench) spread over the three hosts, one model per rank
#      (train/instruments/study.h), writes the table one process writes;
#   2. with one host cut off mid-run (its switch port set down: no error, only silence, as when a
#      cable or a machine goes), every rank ends within train.collective_timeout_s with a message
#      naming the lost rank (the lost rank's own names the others), mpirun ends, and the last
#      checkpoint loads and resumes in one process.
# It sets the namespaces up and always tears them down (trap EXIT; stale ones of an earlier run that
# was killed are removed at start), and skips with one line without root, `ip netns` or mpirun.
#   usage: distributed_hosts.sh path/to/relgrad
set -euo pipefail

relgrad=${1:?usage: distributed_hosts.sh path/to/relgrad}
[[ -x $relgrad ]] || { echo "distributed_hosts: $relgrad is not an executable" >&2; exit 1; }
relgrad=$(cd "$(dirname "$relgrad")" && pwd)/$(basename "$relgrad")
skip() { echo "distributed_hosts: skipped: $*"; exit 0; }
fail() { echo "distributed_hosts: FAIL: $*" >&2; exit 1; }
say() { echo "distributed_hosts: [$((SECONDS - started)) s] $*"; }
started=$SECONDS

[[ $(id -u) == 0 ]] || skip "needs root (network namespaces)"
command -v ip >/dev/null || skip "no ip command (iproute2)"
command -v mpirun >/dev/null || skip "mpirun is not installed (apt-get install openmpi-bin)"
command -v orted >/dev/null || skip "Open MPI's orted is not installed (apt-get install openmpi-bin)"
command -v unshare >/dev/null || skip "no unshare command (util-linux)"

# Every name carries this process's id; "rgh<pid>" namespaces whose test process is gone were left
# by a run that was killed (SIGKILL runs no trap): their processes and the namespaces go now.
prefix=rgh$$
ns_pids() { ip netns pids "$1" 2>/dev/null || true; }
remove_ns() {
  local ns=$1 pids
  for _ in $(seq 50); do
    pids=$(ns_pids "$ns")
    [[ -z $pids ]] && break
    kill -9 $pids 2>/dev/null || true
    sleep 0.1
  done
  ip netns del "$ns" 2>/dev/null || true
}
for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E '^rgh[0-9]+(sw|h[0-9]+)$' || true); do
  owner=${ns#rgh}
  owner=${owner%%[a-z]*}
  if ! grep -qs distributed_hosts "/proc/$owner/cmdline"; then
    echo "distributed_hosts: removing $ns, left by an earlier run (process $owner) that was killed"
    remove_ns "$ns"
  fi
done
for dir in "${TMPDIR:-/tmp}"/relgrad_distributed_hosts.*; do
  owner=${dir##*.}
  [[ -d $dir && $owner =~ ^[0-9]+$ ]] || continue
  grep -qs distributed_hosts "/proc/$owner/cmdline" || rm -rf "$dir"
done

work=${TMPDIR:-/tmp}/relgrad_distributed_hosts.$$
rm -rf "$work"  # a directory of this pid is one an earlier, killed process left
mkdir "$work"
switch=${prefix}sw
hosts=("${prefix}h1" "${prefix}h2" "${prefix}h3")
made=()
mpirun_pid=
cleanup() {
  [[ -n $mpirun_pid ]] && kill -9 "$mpirun_pid" 2>/dev/null || true
  for ns in "${made[@]}"; do remove_ns "$ns"; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Can this machine make namespaces, veth pairs and bridges at all? (Containers often cannot.)
probe_ok=0
if ip netns add "$switch" 2>"$work/probe.err"; then
  made+=("$switch")
  if ip -n "$switch" link add br0 type bridge 2>>"$work/probe.err" &&
     ip -n "$switch" link add probe0 type veth peer name probe1 2>>"$work/probe.err"; then
    ip -n "$switch" link del probe0
    probe_ok=1
  fi
fi
[[ $probe_ok == 1 ]] ||
  skip "cannot create network namespaces, veth pairs or bridges here: $(head -1 "$work/probe.err")"

# The network: 198.18.0.0/24 (RFC 2544's benchmarking range). Every address lives inside these
# namespaces, so it cannot clash with this machine's networks or with a concurrent run.
net=198.18.0
ip -n "$switch" link set lo up
ip -n "$switch" addr add "$net.1/24" dev br0
ip -n "$switch" link set br0 up
for i in 1 2 3; do
  ns=${hosts[i - 1]}
  ip netns add "$ns"
  made+=("$ns")
  # Port h<i> of the switch, cabled to eth0 of host i.
  ip -n "$switch" link add "h$i" type veth peer name eth0 netns "$ns"
  ip -n "$switch" link set "h$i" master br0 up
  ip -n "$ns" addr add "$net.$((i + 1))/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" link set lo up
done
# mpirun notices a lost host when TCP gives up on its connection to that host's daemon: Linux's
# default (net.ipv4.tcp_retries2 = 15) takes about 15 minutes; 3 (a few seconds) in the launcher.
ip netns exec "$switch" sysctl -qw net.ipv4.tcp_retries2=3

# ssh's stand-in: Open MPI runs `agent HOST COMMAND...` to start its daemon on HOST, which gets a
# host's own network (the namespace), host name and /tmp. One /tmp for all crashed now and then
# (orted in hwloc_shmem_topology_write, mpirun then waiting forever): each daemon writes the
# machine's topology to a shared-memory file in its session directory under TMPDIR, named after the
# host name and the job, so daemons on one kernel wrote the same file.
cat >"$work/agent" <<EOF
#!/bin/sh
host=\$1
shift
case \$host in ${prefix}h[0-9]) ;; *) echo "agent: unknown host \$host" >&2; exit 1 ;; esac
echo "\$host" >>"$work/agent.log"
mkdir -p "$work/tmp/\$host"
TMPDIR="$work/tmp/\$host" exec ip netns exec "\$host" unshare --uts /bin/sh -c "hostname \$host && \$*"
EOF
chmod +x "$work/agent"
printf '%s slots=1\n' "${hosts[@]}" >"$work/hostfile"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun_across_hosts=(ip netns exec "$switch" mpirun --hostfile "$work/hostfile" -np 3 --map-by node
  --bind-to none --mca plm_rsh_agent "$work/agent" --mca plm_rsh_no_tree_spawn 1
  --mca oob_tcp_if_include "$net.0/24" --mca btl tcp,self --mca btl_tcp_if_include "$net.0/24")

# A tiny decoder-only model in float64 with SGD + momentum and dropout, 5 rows a step (1 + 2 + 2 on
# three ranks), one thread per process: the setting in which tests/test_distributed_mpi.cpp finds
# every weight of 3 ranks on one machine within 1e-12 of one process.
tiny=(--model.type=decoder-only --model.d_model=16 --model.n_heads=2 --model.d_ff=32
      --model.n_decoder_layers=1 --model.dropout=0.2 --data.num_symbols=6 --data.min_len=3
      --data.max_len=6 --data.batch_size=5 --train.dtype=float64 --optim.name=sgd --optim.momentum=0.9
      --optim.lr=0.1 --optim.warmup_steps=2 --train.samples=0 --train.target_accuracy=0
      --train.threads=1 --train.batch_shards=1 --train.eval_batches=3)

# ---- 1. three hosts train what one process trains --------------------------------------------
say "hosts ${hosts[*]} on $net.0/24, launcher $switch at $net.1"
"$relgrad" train "${tiny[@]}" --train.steps=8 --train.log_every=1 --train.eval_every=4 \
  --train.out_dir="$work/one" >"$work/one.out" 2>&1 || { cat "$work/one.out" >&2; fail "one process failed"; }
got=0
timeout 60 "${mpirun_across_hosts[@]}" "$relgrad" train "${tiny[@]}" --train.steps=8 --train.log_every=1 \
  --train.eval_every=4 --train.out_dir="$work/hosts" >"$work/hosts.out" 2>"$work/hosts.err" || got=$?
grep -q "built without MPI" "$work/hosts.err" && skip "relgrad was built without MPI (RELGRAD_MPI)"
[[ $got == 0 ]] ||
  { cat "$work/hosts.out" "$work/hosts.err" "$work/agent.log" >&2; fail "mpirun across hosts exited $got"; }
[[ $(sort -u "$work/agent.log" | wc -l) == 3 ]] ||
  fail "Open MPI did not start a daemon on each host: $(cat "$work/agent.log")"
grep -q "^data parallel: 3 ranks (mpi), rank 0 trains rows \[0, 1) of 5" "$work/hosts.out" ||
  fail "no 3-rank data-parallel run: $(head -c 2000 "$work/hosts.out")"

# (event step loss) of each log record.
losses() { sed -E 's/^\{"event":"([a-z]+)","step":([0-9]+),"loss":([^,]+),.*/\1 \2 \3/' "$1"; }
# Every float64 of a safetensors file's data (8-byte header size, JSON header, then the data): the
# headers differ (each names its own train.out_dir), the tensor tables must not.
values() {
  local size
  size=$(od -A n -t u8 -N 8 "$1" | tr -d ' ')
  od -A n -v -t f8 -j $((8 + size)) "$1" | tr -s ' ' '\n' | sed '/^$/d'
}
tensors() { "$relgrad" inspect "$1" | grep -E '^  [a-z_]+\.'; }
# "<values> <different> <largest difference>" of two runs' checkpoints; fails beyond 1e-12 relative.
same_checkpoints() {
  [[ $(tensors "$1") == "$(tensors "$2")" ]] || { echo "the tensor tables differ"; return 1; }
  paste -d ' ' <(values "$1") <(values "$2") | awk '
    NF != 2 { print "different sizes"; bad = 1; exit }
    { d = $1 - $2; if (d < 0) d = -d; m = $2 < 0 ? -$2 : $2; if ($1 != $2) differ++
      if (d > worst) worst = d
      if (d > 1e-12 * (m > 1 ? m : 1)) { print "value " NR ": " $1 " vs " $2; bad = 1; exit } }
    END { if (!bad && NR < 1000) { print "only " NR " values"; bad = 1 }
          if (!bad) print NR, differ + 0, worst + 0; exit bad }'
}
[[ $(losses "$work/one/log.jsonl" | wc -l) == 10 ]] ||
  fail "the one-process log has not 8 train + 2 eval records"
[[ "$(losses "$work/one/log.jsonl")" == "$(losses "$work/hosts/log.jsonl")" ]] ||
  fail "the losses differ: $(diff <(losses "$work/one/log.jsonl") <(losses "$work/hosts/log.jsonl") | head)"
compared=$(same_checkpoints "$work/one/checkpoint.safetensors" "$work/hosts/checkpoint.safetensors") ||
  fail "the checkpoints differ: $compared"
read -r n differ worst <<<"$compared"
# The comparison tells another run apart (one more process, another data seed).
"$relgrad" train "${tiny[@]}" --train.steps=8 --data.seed=1 --train.eval_every=0 \
  --train.out_dir="$work/other" >/dev/null 2>&1 || fail "the one-process run with data.seed=1 failed"
if same_checkpoints "$work/one/checkpoint.safetensors" "$work/other/checkpoint.safetensors" >/dev/null; then
  fail "the checkpoint comparison does not tell a run with another data seed apart"
fi
say "3 hosts = 1 process: the same 10 logged losses; $n checkpoint values, $differ differ by rounding," \
  "at most $worst"

# ---- 1b. a study's models spread over the hosts give one process's table ---------------------
study=(length-bench --tasks copy --treatments none,t5,alibi --seeds 1,2 --steps 12)
"$relgrad" "${study[@]}" --out "$work/study-one" >"$work/study-one.out" 2>&1 ||
  { cat "$work/study-one.out" >&2; fail "the study in one process failed"; }
timeout 120 "${mpirun_across_hosts[@]}" "$relgrad" "${study[@]}" --out "$work/study-hosts" \
  >"$work/study-hosts.out" 2>"$work/study-hosts.err" ||
  { cat "$work/study-hosts.out" "$work/study-hosts.err" >&2; fail "the study across hosts failed"; }
# Every column but the seconds each model took.
[[ $(cut -d, -f1-8 "$work/study-one/results.csv") == "$(cut -d, -f1-8 "$work/study-hosts/results.csv")" ]] ||
  fail "the study's tables differ: $(diff "$work/study-one/results.csv" "$work/study-hosts/results.csv" | head)"
[[ $(find "$work/study-hosts/runs" -name study-record.txt | wc -l) == 6 ]] || fail "not every model left its record"
say "the study's 6 models over 3 hosts: the table one process writes"

# ---- 2. a host is cut off mid-run ---------------------------------------------------------------
timeout_s=4
: >"$work/agent.log"
"${mpirun_across_hosts[@]}" --output-filename "$work/ranks" "$relgrad" train "${tiny[@]}" \
  --train.steps=100000000 --train.save_every=100 --train.log_every=100 --train.eval_every=0 \
  --train.collective_timeout_s=$timeout_s --train.out_dir="$work/cut" >"$work/cut.out" 2>"$work/cut.err" &
mpirun_pid=$!
running_on() {  # a relgrad process in namespace $1
  local p
  for p in $(ns_pids "$1"); do [[ $(cat "/proc/$p/comm" 2>/dev/null) == relgrad ]] && return 0; done
  return 1
}
ranks_left() { local ns n=0; for ns in "${hosts[@]}"; do running_on "$ns" && n=$((n + 1)); done; echo $n; }
for _ in $(seq 600); do  # until a checkpoint is written and a rank trains on every host, at most 60 s
  [[ -s $work/cut/checkpoint.safetensors && $(ranks_left) == 3 ]] && break
  kill -0 "$mpirun_pid" 2>/dev/null || { cat "$work/cut.err" >&2; fail "the long run ended early"; }
  sleep 0.1
done
[[ -s $work/cut/checkpoint.safetensors && $(ranks_left) == 3 ]] ||
  { cat "$work/cut.err" "$work/agent.log" >&2; fail "the long run did not get going in 60 s"; }
sleep 0.5
ip -n "$switch" link set h3 down  # host 3, rank 2 (--map-by node): its cable is pulled
cut_at=$(date +%s%N)
elapsed() { echo $((($(date +%s%N) - cut_at) / 1000000)); }  # ms since the cut
say "host ${hosts[2]} (rank 2) cut off near step" \
  "$(tail -1 "$work/cut/log.jsonl" | sed -E 's/.*"step":([0-9]+).*/\1/')"
ranks_ended_ms=
for _ in $(seq 300); do  # every rank process on every host gone, at most 30 s
  [[ $(ranks_left) == 0 ]] && { ranks_ended_ms=$(elapsed); break; }
  sleep 0.1
done
[[ -n $ranks_ended_ms ]] || fail "$(ranks_left) ranks still run 30 s after the cut"
mpirun_status=
for _ in $(seq 400); do  # mpirun ends too, at most 40 s
  kill -0 "$mpirun_pid" 2>/dev/null || { mpirun_status=0; wait "$mpirun_pid" || mpirun_status=$?; break; }
  sleep 0.1
done
mpirun_ended_ms=$(elapsed)
[[ -n $mpirun_status ]] || fail "mpirun still runs 40 s after the cut, though every rank has ended"
mpirun_pid=
say "every rank ended $ranks_ended_ms ms after the cut (collective timeout ${timeout_s} s);" \
  "mpirun exited $mpirun_status after $mpirun_ended_ms ms"
((ranks_ended_ms <= (timeout_s + 4) * 1000)) ||
  fail "the ranks took $ranks_ended_ms ms to end, timeout $timeout_s s"
[[ $mpirun_status != 0 ]] || fail "mpirun exited 0 after losing a host"

# What the ranks said. The survivors' errors reach mpirun; the lost rank's stderr cannot (its daemon
# is cut off too), so it is read from the file that daemon wrote (--output-filename).
timed_out=": all_reduce_sum of [0-9]+ float64 values did not complete within $timeout_s s:"
timed_out+=" another rank has failed or stopped"
said_by() {  # rank, where: its error line
  local head="^relgrad train \(rank $1 of 3\): error: \[distributed\] rank $1 of 3"
  grep -hE "$head$timed_out" "$2" 2>/dev/null || true
}
survivors=0
for r in 0 1; do
  line=$(said_by $r "$work/cut.err")
  [[ -z $line ]] && continue  # the first rank to time out ends the job, so the other may not get to say it
  survivors=$((survivors + 1))
  want="; no word from rank 2 while waiting: lost (a host or network link down), hung or stopped"
  [[ $line == *"$want (rank $((1 - r)) was heard from)" ]] ||
    fail "rank $r does not name rank 2 as the lost one: $line"
  echo "  $line"
done
((survivors > 0)) || fail "no surviving rank says which rank it lost: $(cat "$work/cut.err")"
line=$(said_by 2 "$work/ranks/1/rank.2/stderr")
[[ $line == *"; no word from ranks 0 and 1 while waiting: "* ]] ||
  fail "the lost rank 2 does not name ranks 0 and 1: $(cat "$work/ranks/1/rank.2/stderr" 2>/dev/null)"
echo "  $line"
if grep -q "relgrad train (rank 2 of 3)" "$work/cut.err"; then
  fail "the lost rank's stderr reached mpirun, though its host was cut off"
fi

# The last checkpoint loads, and one process resumes it (another rank count is allowed) for 5 steps.
"$relgrad" inspect "$work/cut/checkpoint.safetensors" >"$work/inspect.out" ||
  fail "the last checkpoint does not load"
step=$(awk '$1 == "step" { print $2 }' "$work/inspect.out")
[[ $step =~ ^[0-9]+$ && $step -ge 100 ]] || fail "the last checkpoint's step is '$step'"
"$relgrad" train --resume "$work/cut/checkpoint.safetensors" --train.steps=$((step + 5)) \
  >"$work/resume.out" 2>&1 ||
  { cat "$work/resume.out" >&2; fail "resuming the last checkpoint failed"; }
grep -q "^done: $((step + 5)) steps" "$work/resume.out" ||
  fail "the resumed run did not finish: $(tail -3 "$work/resume.out")"
say "the last checkpoint (step $step) loads; one process resumed it to step $((step + 5))"
say "ok"
