#!/usr/bin/env python3
"""fault_test.py: a group limit under faults to its ledger, with real processes over the fake driver.

    tests/shim/fault_test.py VRAM FAKE_CUDA_DIR APP_DRIVER

Six members of one group (`vram run --growth --group gf --group-limit 1GiB`) run app_driver's `churn`
scenario (random cuMemAlloc / cuMemFree of 16..192 MiB, 16 blocks at most, so each alone would want
up to 3 GiB), while this script, for FAULT_S seconds, damages the ledger at random moments: corrupts
its header, truncates it (to nothing or part), deletes it, replaces it (by an empty file or by
garbage), kill -9s a member (and starts a new one in its place), and runs `vram top --once --json`.
The fake driver is shared by the members (FAKE_CUDA_SHARED) and records the highest sum of bytes its
live processes ever held on the card (fake_cuda.c).

Checks:
  - no process dies of a signal other than the SIGKILLs sent; every member that was not killed ends
    with status 0 (its allocations either succeeded or were refused with out of memory);
  - vram top never fails (no SIGBUS), during the faults or after;
  - the members together never held more than the group limit (the fake driver's high-water mark),
    and the limit was reached (refusals happened): the test means something;
  - after the faults stop (and a second for every member to follow the file), vram top lists exactly
    the running members, once each, their usage within the limit: no stale slot, none lost;
  - at the end, with every member gone, vram top lists no process.
Deterministic enough: seeded (FAULT_SEED, default 18, printed), bounded loops, about 15 s.
FAULT_ONLY="delete,kill -9" limits the faults to those named (to find which one breaks a check).
Prints each check with PASS/FAIL, then "N passed, N failed"; exits 1 when a check failed.
"""
import json
import os
import random
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

GIB = 1 << 30
LIMIT = GIB
MEMBERS = 6
FAULT_S = 10.0
QUIET_S = 1.0
REST_S = 2.0
FAKE_SHARE_PEAK_AT = 128 * (4 + 4 + 16 * 8)   # fake_cuda.c: FAKE_SHARE_ENTRIES * sizeof(fake_share_entry)


class Test:
    def __init__(self):
        self.passed = self.failed = 0

    def check(self, name, ok, detail=""):
        if ok:
            print("PASS  " + name)
            self.passed += 1
        else:
            print("FAIL  " + name + ("\n  " + detail.replace("\n", "\n  ") if detail else ""))
            self.failed += 1


def main():
    if len(sys.argv) != 4:
        print("usage: fault_test.py VRAM FAKE_CUDA_DIR APP_DRIVER", file=sys.stderr)
        return 2
    vram, fake, app = sys.argv[1:4]
    seed = int(os.environ.get("FAULT_SEED", "18"))
    print("fault_test: seed %d (FAULT_SEED=%d reruns it)" % (seed, seed))
    rng = random.Random(seed)
    t = Test()
    tmp = tempfile.mkdtemp(prefix="vram_fault.")
    env = {k: v for k, v in os.environ.items()
           if not (k.startswith("VRAM_") or k.startswith("FAKE_CUDA") or k in ("LD_PRELOAD", "CUDA_VISIBLE_DEVICES"))}
    run_dir = os.path.join(tmp, "run")
    os.mkdir(run_dir, 0o700)
    cards = os.path.join(tmp, "cards")
    env.update(XDG_RUNTIME_DIR=run_dir, FAKE_CUDA_SHARED=cards,
               LD_LIBRARY_PATH=fake + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else ""))
    ledger_dir = os.path.join(run_dir, "vram")
    ledger = os.path.join(ledger_dir, "ledger")
    ledger_size = 64 + 1024 * 168

    start = time.monotonic()
    end = start + FAULT_S + QUIET_S + REST_S
    members = {}        # member index -> (Popen, out path, err path)
    finished = []       # (returncode, killed, out path, err path)
    generation = [0]

    def start_member(i):
        generation[0] += 1
        ms = max(200, int((end - time.monotonic()) * 1000))
        out = os.path.join(tmp, "m%d.%d.out" % (i, generation[0]))
        err = out[:-4] + ".err"
        cmd = [vram, "run", "--growth", "--group", "gf", "--group-limit", "1GiB", "--", app, "dlsym", "churn",
               str(seed * 1000 + generation[0]), str(ms), "192", "0"]
        with open(out, "w") as o, open(err, "w") as e:
            members[i] = (subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=o, stderr=e), out, err)

    def top():
        r = subprocess.run([vram, "top", "--once", "--json"], env=env, stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=30)
        return r.returncode, r.stdout, r.stderr

    def tail(path):
        try:
            with open(path) as f:
                return f.read()[-600:]
        except OSError:
            return ""

    def private_file(data):
        p = os.path.join(ledger_dir, "ledger.new")
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.write(fd, data)
        os.close(fd)
        os.rename(p, ledger)

    def corrupt():
        fd = os.open(ledger, os.O_WRONLY)
        os.pwrite(fd, bytes(rng.randrange(256) for _ in range(64)), 0)
        os.close(fd)

    faults = {
        "corrupt header": corrupt,
        "truncate to 0": lambda: os.truncate(ledger, 0),
        "truncate part": lambda: os.truncate(ledger, rng.randrange(1, ledger_size)),
        "delete": lambda: os.unlink(ledger),
        "replace empty": lambda: private_file(b""),
        "replace garbage": lambda: private_file(bytes(rng.randrange(256) for _ in range(rng.randrange(1, 4096)))),
    }
    actions = list(faults) + ["kill -9", "vram top"]
    if os.environ.get("FAULT_ONLY"):   # e.g. FAULT_ONLY="delete,kill -9": to find which fault breaks a check
        actions = [a for a in actions if a in os.environ["FAULT_ONLY"].split(",")]
    done = {name: 0 for name in actions}
    top_failures = []

    try:
        for i in range(MEMBERS):
            start_member(i)
        time.sleep(0.3)
        while time.monotonic() < start + FAULT_S:
            time.sleep(rng.uniform(0.02, 0.08))
            action = rng.choice(actions)
            if action == "kill -9":
                i = rng.randrange(MEMBERS)
                p, out, err = members[i]
                if p.poll() is None:
                    p.send_signal(signal.SIGKILL)
                p.wait()
                finished.append((p.returncode, True, out, err))
                start_member(i)
            elif action == "vram top":
                rc, out, err = top()
                if rc != 0:
                    top_failures.append("rc=%d %s" % (rc, err.strip()[-300:]))
            else:
                try:
                    faults[action]()
                except FileNotFoundError:
                    continue   # nothing there to damage (deleted, or moved aside by a rebuild)
            done[action] += 1
        print("fault_test: " + ", ".join("%s %d" % kv for kv in done.items()))
        t.check("vram top never failed during the faults (%d runs)" % done.get("vram top", 0), not top_failures,
                "\n".join(top_failures[:5]))

        time.sleep(QUIET_S)   # every member allocates in the meantime, and so follows the file at the path
        running = {p.pid for p, _, _ in members.values() if p.poll() is None}
        rc, out, err = top()
        try:
            rows = json.loads(out)["processes"] if rc == 0 else []
        except ValueError:
            rows = []
        listed = [(r["pid"], r["device"]) for r in rows]
        t.check("after the faults, vram top lists exactly the running members, once each (no stale slot, none lost)",
                rc == 0 and sorted(pid for pid, _ in listed) == sorted(running) and len(set(listed)) == len(listed),
                "rc=%d listed=%s running=%s err=%s" % (rc, sorted(listed), sorted(running), err.strip()))
        in_use = sum(r["in_use_bytes"] for r in rows)
        t.check("... and what they hold there is within the group limit", in_use <= LIMIT, "in use %d" % in_use)

        for i, (p, out, err) in members.items():
            try:
                p.wait(timeout=max(5.0, end - time.monotonic() + 10))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            finished.append((p.returncode, False, out, err))
        members.clear()
    finally:
        for p, _, _ in members.values():
            p.kill()
            p.wait()

    bad = [(rc, killed, err) for rc, killed, out, err in finished
           if not (killed and rc == -signal.SIGKILL) and not (rc == 0 and "churn ok=" in tail(out))]
    t.check("no member died of a signal other than the SIGKILLs sent; the others ended with status 0 (%d runs, %d killed)"
            % (len(finished), sum(1 for f in finished if f[1])), not bad,
            "\n".join("rc=%s killed=%s: %s" % (rc, killed, tail(err)) for rc, killed, err in bad[:5]))
    refused = 0
    for _, _, out, _ in finished:
        for word in tail(out).split():
            if word.startswith("refused="):
                refused += int(word[len("refused="):])
    with open(cards, "rb") as f:
        f.seek(FAKE_SHARE_PEAK_AT)
        peak = struct.unpack("<Q", f.read(8))[0]
    t.check("the members together never held more than the group limit (peak %d MiB of %d MiB)"
            % (peak >> 20, LIMIT >> 20), 0 < peak <= LIMIT)
    t.check("... and the limit was reached: %d allocations refused, peak above 3/4 of it" % refused,
            refused > 0 and peak > LIMIT * 3 // 4)
    rc, out, err = top()
    t.check("at the end vram top lists no process", rc == 0 and '"processes": []' in out, "rc=%d %s %s" % (rc, out, err))

    print("%d passed, %d failed" % (t.passed, t.failed))
    if t.failed == 0:
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        print("fault_test: files kept in " + tmp)
    return 1 if t.failed else 0


if __name__ == "__main__":
    sys.exit(main())
