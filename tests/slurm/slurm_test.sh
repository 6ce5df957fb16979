#!/usr/bin/env bash
# slurm_test.sh: the SPANK plugin (lib/slurm/vram.so) in a real one-node Slurm cluster, started and
# stopped here: munged on a private socket, slurmctld and slurmd on the loopback interface with a
# generated slurm.conf (one GPU declared as gres/gpu and four gres/shard; the fake libcuda.so.1 of the
# shim's tests stands in for the card), jobs run through srun and sbatch.
#
#   tests/slurm/slurm_test.sh VRAM SPANK_SO PRELOAD_SO FAKE_CUDA_DIR APP_DRIVER
#
# Needs root (slurmd runs jobs as their user; mknod for the GPU's device file; useradd for the user whose
# job's epilog meets a held ledger lock, removed at exit) and Debian's slurmctld, slurmd, slurm-client and
# munge; exits 77 (skipped) without them, unless CI is set (then it fails: .ci/run installs them). Prints
# each check with PASS/FAIL, then "N passed, N failed".
set -euo pipefail

if [[ $# -ne 5 ]]; then
    echo "usage: $0 VRAM SPANK_SO PRELOAD_SO FAKE_CUDA_DIR APP_DRIVER" >&2
    exit 2
fi
VRAM=$1 SPANK=$2 PRELOAD=$3 FAKE=$4 APP=$5

skip() {
    if [[ -n ${CI:-} ]]; then echo "FAIL  $1 (CI is set: .ci/run installs what this test needs)"; exit 1; fi
    echo "skipped: $1"
    exit 77
}
[[ $(id -u) -eq 0 ]] || skip "needs root (slurmd, mknod)"
for c in munged slurmctld slurmd srun sbatch scancel squeue useradd userdel setpriv; do
    command -v "$c" >/dev/null || skip "$c is not installed (apt-get install slurmctld slurmd slurm-client munge)"
done

unset VRAM_LIMIT VRAM_LOG VRAM_GROWTH VRAM_GROUP VRAM_GROUP_LIMIT CUDA_VISIBLE_DEVICES LD_PRELOAD \
      VRAM_BACKEND VRAM_SIM_DEVICES FAKE_CUDA_DEVICES XDG_RUNTIME_DIR SLURM_JOB_ID
for v in $(compgen -e | grep -E '^(VRAM_LIMIT_|SLURM_)' || true); do unset "$v"; done
GiB=1073741824
TMP=$(mktemp -d /tmp/vram-slurm.XXXXXX)
chmod 755 "$TMP"
PASSED=0
FAILED=0
PIDS=()

cleanup() {
    set +e
    [[ -n ${SLURM_CONF:-} ]] && scancel --quiet --user=root >/dev/null 2>&1
    [[ -n ${SLURM_CONF:-} && -n ${EUSER_MADE:-} ]] && scancel --quiet --user="$EUSER_MADE" >/dev/null 2>&1
    for f in slurmd slurmctld munged; do
        [[ -f $TMP/$f.pid ]] && kill "$(cat "$TMP/$f.pid")" 2>/dev/null
    done
    for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
    # a task of this cluster that outlived its job (none should): only processes with this test's
    # SLURM_CONF in their environment, never another test's processes running the same program
    for p in $(pgrep -f "$APP dlsym hold" 2>/dev/null); do
        tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qxF "SLURM_CONF=$SLURM_CONF" && kill -9 "$p"
    done
    sleep 0.5
    for f in slurmd slurmctld munged; do
        [[ -f $TMP/$f.pid ]] && kill -9 "$(cat "$TMP/$f.pid")" 2>/dev/null
    done
    if [[ -n ${EUSER_MADE:-} ]]; then        # the user this test made: what it left running, its ledger
        rm -rf "/dev/shm/vram-$(id -u "$EUSER_MADE")"
        for _ in 1 2 3 4 5; do              # userdel refuses while a process of the user still exits
            for p in $(pgrep -u "$EUSER_MADE" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
            sleep 0.2
            userdel "$EUSER_MADE" 2>/dev/null && break
        done
    fi
    if [[ $FAILED -gt 0 || -n ${KEEP:-} ]]; then
        for f in "$TMP"/log/*.log; do echo "== $f"; tail -n 25 "$f"; done
    fi
    rm -rf "$TMP"
}
trap cleanup EXIT

# The binaries where the unprivileged user of the epilog's check can run them too (the build tree may be
# closed to others, as under /root): vram with the preload library beside it, the driver, the fake libcuda.
mkdir -m 755 "$TMP/bin" "$TMP/bin/fake"
cp "$VRAM" "$PRELOAD" "$APP" "$TMP/bin/"
cp -P "$FAKE"/lib* "$TMP/bin/fake/"
VRAM=$TMP/bin/$(basename "$VRAM") PRELOAD=$TMP/bin/$(basename "$PRELOAD") APP=$TMP/bin/$(basename "$APP")
FAKE=$TMP/bin/fake
export LD_LIBRARY_PATH=$FAKE${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

# shellcheck source=/dev/null
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"   # run, check, has

# ---- the cluster --------------------------------------------------------------------------------
mkdir -p "$TMP"/{munge,state,spool,log,dev}
mknod "$TMP/dev/nvidia0" c 1 3 2>/dev/null || skip "mknod is not permitted here (a GPU's device file for gres.conf)"
dd if=/dev/urandom of="$TMP/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$TMP/munge/munge.key"
SOCK=$TMP/munge/munge.socket
munged --force --socket="$SOCK" --key-file="$TMP/munge/munge.key" --pid-file="$TMP/munged.pid" \
       --log-file="$TMP/log/munged.log" --seed-file="$TMP/munge/seed" >/dev/null 2>&1 ||
    skip "munged does not start: $(tail -n 2 "$TMP/log/munged.log" 2>/dev/null)"

HOST=$(hostname -s)
PORT=$((20000 + $$ % 20000))
export SLURM_CONF=$TMP/slurm.conf
cat >"$SLURM_CONF" <<EOF
ClusterName=vramtest
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=$PORT
SlurmdPort=$((PORT + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$SOCK
CredType=cred/munge
StateSaveLocation=$TMP/state
SlurmdSpoolDir=$TMP/spool
SlurmctldPidFile=$TMP/slurmctld.pid
SlurmdPidFile=$TMP/slurmd.pid
SlurmctldLogFile=$TMP/log/slurmctld.log
SlurmdLogFile=$TMP/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
KillWait=2
GresTypes=gpu,shard
PlugStackConfig=$TMP/plugstack.conf
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$(nproc) RealMemory=1000 Gres=gpu:1,shard:4 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
cat >"$TMP/gres.conf" <<EOF
Name=gpu File=$TMP/dev/nvidia0
Name=shard Count=4
EOF
# The site's line: a shard is 1 GiB of the card.
echo "required $SPANK preload=$PRELOAD shard_limit=1GiB" >"$TMP/plugstack.conf"

slurmctld -f "$SLURM_CONF" || skip "slurmctld does not start"
# slurmd (and so each slurmstepd, where the plugin's task_init runs) with a VRAM_LEDGER_DIR of its own, as a
# site's unit file could give it: the tasks' ledger is still the node's place for the user (the checks of
# "ledger=/dev/shm/vram-0" below), the one the epilog frees slots in.
VRAM_LEDGER_DIR=$TMP/slurmd-ledger slurmd -f "$SLURM_CONF" || skip "slurmd does not start"
up=0
for _ in $(seq 100); do
    if sinfo -h -o %T 2>/dev/null | grep -qE '^(idle|mixed)'; then up=1; break; fi
    sleep 0.2
done
[[ $up -eq 1 ]] || { FAILED=1; echo "FAIL  the cluster did not come up"; exit 1; }
echo "cluster up: $HOST, ports $PORT-$((PORT + 1))"

S() { timeout 60 srun --quiet "$@"; }

# ---- limits -------------------------------------------------------------------------------------
run S --vram-limit=2GiB "$APP" dlsym info
check "a task sees --vram-limit as the card's total" '[[ $RC -eq 0 ]] && has "$OUT" "total=$((2 * GiB))"'

run S --vram-limit=1GiB --vram-growth "$APP" dlsym fill alloc 256
check "past the limit: CUDA_ERROR_OUT_OF_MEMORY" 'has "$OUT" "bytes=$GiB err=2"'

run S --vram-limit=1GiB "$APP" dlsym fill alloc 256
check "preallocated (no --vram-growth): the same limit" 'has "$OUT" "bytes=$GiB err=2"'

# growth=1 in plugstack.conf: the default for a job that does not say --vram-growth (each srun and step
# reads plugstack.conf again). Without it a task preallocates its limit at its first allocation (the fake
# driver holds the whole 1 GiB for a block of 256 MiB); with it the task holds only its block.
held_256='printf "alloc 256\nheld\n" | '"$APP"' dlsym script'
run S --vram-limit=1GiB bash -c 'echo "growth=$VRAM_GROWTH"; '"$held_256"
check "the site's default growth (none in plugstack.conf): a task without --vram-growth holds its whole 1 GiB limit for 256 MiB" \
    '[[ $RC -eq 0 ]] && has "$OUT" "growth=0" && has "$OUT" "alloc=0" && has "$OUT" "held=$GiB "'
echo "required $SPANK preload=$PRELOAD shard_limit=1GiB growth=1" >"$TMP/plugstack.conf"
run S --vram-limit=1GiB bash -c 'echo "growth=$VRAM_GROWTH"; '"$held_256"
check "growth=1 in plugstack.conf: a task without --vram-growth grows (it holds its 256 MiB block only)" \
    '[[ $RC -eq 0 ]] && has "$OUT" "growth=1" && has "$OUT" "alloc=0" && has "$OUT" "held=$((GiB / 4)) "'
echo "required $SPANK preload=$PRELOAD shard_limit=1GiB" >"$TMP/plugstack.conf"

run S --gres=shard:2 bash -c 'echo "group=$VRAM_GROUP"; '"$APP"' dlsym info'
check "2 shards of 1 GiB (plugstack.conf shard_limit): a 2 GiB limit, group slurm-<job>" \
    '[[ $RC -eq 0 ]] && has "$OUT" "total=$((2 * GiB))" && [[ $OUT =~ group=slurm-[0-9]+ ]]'

run S --gres=gpu:1 bash -c 'echo "cvd=$CUDA_VISIBLE_DEVICES limit=${VRAM_LIMIT:-none}"'
check "no limit asked or given: the task runs as it would, CUDA_VISIBLE_DEVICES as Slurm set it" \
    '[[ $RC -eq 0 ]] && has "$OUT" "cvd=0 limit=none"'

run S --vram-fraction=0.25 --vram-growth "$APP" dlsym info
check "--vram-fraction=0.25 of the 16 GiB card: 4 GiB" '[[ $RC -eq 0 ]] && has "$OUT" "total=$((4 * GiB))"'

run S --vram-limit=1GiB --vram-growth --vram-overflow=host --vram-priority=opportunistic \
    bash -c 'echo "max=$VRAM_LIMIT_MAX gmax=$VRAM_GROUP_LIMIT_MAX overflow=$VRAM_OVERFLOW priority=$VRAM_PRIORITY"; '"$APP"' dlsym fill alloc 256'
check "--vram-overflow=host, --vram-priority: set for the task, the job's limit its ceiling; past the limit it overflows to host memory, up to as much again (1 + 1 GiB)" \
    '[[ $RC -eq 0 ]] && has "$OUT" "max=$GiB gmax=$GiB overflow=host priority=opportunistic" && has "$OUT" "bytes=$((2 * GiB)) err=2"'
run S --vram-overflow=disk "$APP" dlsym info
check "--vram-overflow=disk: refused" '[[ $RC -ne 0 ]] && has "$ERR" "vram: --vram-overflow=disk"'

# ---- the job's tasks share one budget -----------------------------------------------------------
run S -n 2 --vram-limit=1GiB --vram-growth bash -c 'sleep 3 | '"$APP"' dlsym hold alloc 600'
check "two tasks of one job, 600 MiB each under 1 GiB: one gets it, the other CUDA_ERROR_OUT_OF_MEMORY" \
    '[[ $(grep -c "^hold=0" <<<"$OUT") -eq 1 && $(grep -c "^hold=2" <<<"$OUT") -eq 1 ]]'

# The plugin decides where the job's ledger lives on the node (the user's own place there, whatever the
# environment the job brought): an XDG_RUNTIME_DIR exported from the login node that does not exist here
# (as srun exports the login session's), or tasks that each set their own, do not split the budget.
run env XDG_RUNTIME_DIR=/run/user/4242 timeout 60 srun --quiet -n 2 --vram-limit=1GiB --vram-growth \
    bash -c 'echo "ledger=$VRAM_LEDGER_DIR"; sleep 3 | '"$APP"' dlsym hold alloc 600'
check "XDG_RUNTIME_DIR=/run/user/4242 exported (missing on the node): the job's two tasks still share 1 GiB (one of 600 MiB refused), in the node's ledger" \
    '[[ $(grep -c "^hold=0" <<<"$OUT") -eq 1 && $(grep -c "^hold=2" <<<"$OUT") -eq 1 &&
       $(grep -c "^ledger=/dev/shm/vram-0$" <<<"$OUT") -eq 2 ]]'
mkdir -m 700 "$TMP/jobledger"
run env VRAM_LEDGER_DIR="$TMP/jobledger" timeout 60 srun --quiet -n 2 --vram-limit=1GiB --vram-growth \
    bash -c 'echo "ledger=$VRAM_LEDGER_DIR"; sleep 3 | '"$APP"' dlsym hold alloc 600'
check "VRAM_LEDGER_DIR exported by the job (a directory of the user's): passed over, the tasks share 1 GiB in the node's ledger" \
    '[[ $(grep -c "^hold=0" <<<"$OUT") -eq 1 && $(grep -c "^hold=2" <<<"$OUT") -eq 1 &&
       $(grep -c "^ledger=/dev/shm/vram-0$" <<<"$OUT") -eq 2 && ! -e $TMP/jobledger/ledger ]]'
mkdir -m 700 "$TMP/xdg0" "$TMP/xdg1"
run S -n 2 --vram-limit=1GiB --vram-growth \
    bash -c 'export XDG_RUNTIME_DIR='"$TMP"'/xdg$SLURM_PROCID; sleep 3 | '"$APP"' dlsym hold alloc 600'
check "each task with an XDG_RUNTIME_DIR of its own: still one ledger, one budget (one of 600 MiB refused)" \
    '[[ $(grep -c "^hold=0" <<<"$OUT") -eq 1 && $(grep -c "^hold=2" <<<"$OUT") -eq 1 ]]'

# ---- two jobs on one GPU, each with its shards --------------------------------------------------
timeout 60 srun --quiet --gres=shard:2 --vram-growth bash -c 'sleep 6 | '"$APP"' dlsym hold alloc 1800' \
    >"$TMP/jobA.out" 2>"$TMP/jobA.err" &
PIDS+=($!)
for _ in $(seq 100); do grep -q '^hold=' "$TMP/jobA.out" 2>/dev/null && break; sleep 0.1; done
run S --gres=shard:2 --vram-growth "$APP" dlsym fill alloc 256
check "two jobs with 2 shards each on one GPU: each holds its own 2 GiB" \
    '[[ $(cat "$TMP/jobA.out") == hold=0* ]] && has "$OUT" "bytes=$((2 * GiB)) err=2"'
wait "${PIDS[-1]}" || true

# ---- bad values are refused before anything runs -------------------------------------------------
run timeout 60 srun --vram-limit=12XB touch "$TMP/ran"
check "--vram-limit=12XB: srun refuses it with the plugin's message, nothing runs" \
    '[[ $RC -ne 0 && ! -e $TMP/ran ]] && has "$ERR" "vram: --vram-limit=12XB is not a size"'
run timeout 60 srun --vram-fraction=1.5 touch "$TMP/ran"
check "--vram-fraction=1.5: refused" '[[ $RC -ne 0 && ! -e $TMP/ran ]] && has "$ERR" "vram: --vram-fraction=1.5"'
run timeout 60 srun --vram-limit=0 touch "$TMP/ran"
check "--vram-limit=0: refused (a limit never means none)" '[[ $RC -ne 0 && ! -e $TMP/ran ]] && has "$ERR" "is 0 bytes"'

# ---- --vram-idle-sleep: the task's watcher puts it to sleep when idle and wakes it at its next call ------
# (FAKE_CUDA_SHARED in the job's environment: the fake driver's checkpoint API acts across processes)
run env FAKE_CUDA_SHARED="$TMP/cards" timeout 60 srun --quiet --vram-idle-sleep=300ms --vram-growth \
    bash -c '(echo "alloc 64"; sleep 2; echo launch) | '"$APP"' dlsym script 0'
check "--vram-idle-sleep=300ms: the task is put to sleep when idle, woken by its next call (a kernel launch)" \
    '[[ $RC -eq 0 ]] && has "$OUT" "alloc=0" && has "$OUT" "launch=0" &&
     has "$ERR" "vram: no CUDA call for 300ms: PID" && has "$ERR" "is asleep: its 64.00 MiB" &&
     has "$ERR" "vram: a CUDA call: PID"'
run timeout 60 srun --vram-idle-sleep=0 touch "$TMP/ran"
check "--vram-idle-sleep=0: refused" '[[ $RC -ne 0 && ! -e $TMP/ran ]] && has "$ERR" "vram: --vram-idle-sleep=0 is not a duration"'

# ---- scancel: vram top shows the job while it runs, no slot is left after -----------------------
JOB=$(sbatch --parsable --output="$TMP/jobC.out" \
      --wrap "srun --vram-limit=1GiB --vram-growth bash -c 'exec $APP dlsym hold alloc 300 < <(sleep 120)'")
for _ in $(seq 150); do grep -q '^hold=0' "$TMP/jobC.out" 2>/dev/null && break; sleep 0.1; done
run "$VRAM" top --once
check "vram top lists the running job's task under slurm-$JOB" 'has "$OUT" "slurm-$JOB"'
scancel "$JOB"
for _ in $(seq 100); do squeue -h -j "$JOB" 2>/dev/null | grep -q . || break; sleep 0.2; done
sleep 1                                       # the epilog runs as the job ends
# The ledger file itself (not through vram top, which frees stale slots as it reads): no live slot of
# the job's group is left.
LEDGER=/dev/shm/vram-0/ledger
left=$(python3 - "$LEDGER" "slurm-$JOB" <<'PY'
import struct, sys
data = open(sys.argv[1], "rb").read()
n = struct.unpack_from("<I", data, 20)[0]
live = 0
for i in range(n):
    off = 64 + i * 168
    state, = struct.unpack_from("<I", data, off)
    group = data[off + 104:off + 136].split(b"\0")[0].decode("ascii", "replace")
    live += state == 0x45564c53 and group == sys.argv[2]
print(live)
PY
)
check "after scancel, no slot of the job is left in the ledger" '[[ $left -eq 0 ]]'
run "$VRAM" top --once --json
check "vram top --json after the job: nothing of it" '[[ $RC -eq 0 ]] && ! has "$OUT" "slurm-$JOB"'

# ---- the epilog ends in bounded time whatever the job's user does with the ledger lock ------------------
# A real unprivileged user (created here, removed at exit) runs a job; a process of that user outside the
# job holds the user's ledger.lock (flock) for a minute. The epilog (a child that becomes the user) cannot
# take the lock: the job must still leave COMPLETING within the epilog's bound (10 s) and slurmd's log
# must say what was skipped.
EU=vramepi$$
useradd -M -s /bin/bash "$EU"
EUSER_MADE=$EU
EUID_=$(id -u "$EU")
as_eu() { setpriv --reuid="$EU" --regid="$EU" --init-groups env -u XDG_RUNTIME_DIR -u VRAM_LEDGER_DIR "$@"; }
install -d -o "$EU" -m 700 "$TMP/eu"
EDIR=/dev/shm/vram-$EUID_
as_eu "$VRAM" top --once >/dev/null       # the user's ledger on the node, made as a job's task would
JOB=$(cd "$TMP/eu" && as_eu sbatch --parsable --output="$TMP/eu/job.out" \
      --wrap "srun --vram-limit=1GiB --vram-growth $APP dlsym fill alloc 256; sleep 120")
for _ in $(seq 150); do grep -q '^chunks=' "$TMP/eu/job.out" 2>/dev/null && break; sleep 0.1; done
as_eu bash -c 'exec 9<"$1"; flock 9; echo locked >"$2"; exec sleep 60' _ "$EDIR/ledger.lock" "$TMP/eu/locked" &
PIDS+=($!)
for _ in $(seq 100); do [[ -s $TMP/eu/locked ]] && break; sleep 0.05; done
T0=$(date +%s)
scancel "$JOB"
for _ in $(seq 300); do squeue -h -j "$JOB" 2>/dev/null | grep -q . || break; sleep 0.1; done
T1=$(date +%s)
OUT="job $JOB ($(cat "$TMP/eu/job.out" 2>/dev/null | head -1)), left the queue $((T1 - T0)) s after scancel; $(squeue -h -j "$JOB" -o %T 2>/dev/null)"
check "the job's user holds its ledger lock outside the job: the job still leaves COMPLETING within the epilog's bound" \
    'has "$OUT" "chunks=4 " && (( T1 - T0 <= 20 )) && ! squeue -h -j "$JOB" 2>/dev/null | grep -q .'
OUT=$(grep -F "vram: job $JOB:" "$TMP/log/slurmd.log" || true)
check "... and slurmd's log says the epilog gave up on the held lock, leaving stale slots to the next reader" \
    'has "$OUT" "ledger.lock" && has "$OUT" "held by another process" && has "$OUT" "not freed"'
kill -9 "${PIDS[-1]}" 2>/dev/null || true

echo "$PASSED passed, $FAILED failed"
[[ $FAILED -eq 0 ]]
