#!/usr/bin/env python3
"""mutate.py: plants known bugs in vram, one at a time, and checks that the test suite catches each.

    tests/mutate.py [--list] [--only ID[,ID...]] [--jobs N] [--keep DIR] [--build-type T]

Each mutant (MUTANTS below) is one plausible bug: a piece of code (found by its exact text, which must
occur once in its file) replaced by a wrong one, and the README promise it breaks. The script copies the
checkout's committed tree (HEAD) into a scratch directory, builds it once and runs the suite once (it must
pass), then for each mutant: plants it, rebuilds incrementally, runs the mutant's own tests first (`tests`,
a ctest -R regular expression: quick when they catch it) and, when they pass, the whole suite; restores the
file. A mutant is caught when a test fails (or a test times out); it survives when the whole suite passes.
A mutant that no longer applies (its text is not found once) or that does not build is an error: the list
is kept in step with the code. Mutants shown to be equivalent (no test could tell them from the original)
carry `equivalent` with the reason and are not run.

Prints a line per mutant (caught / SURVIVED / error, the test that caught it, seconds) and the totals;
exits 0 when every mutant run was caught, 1 otherwise, 2 on bad usage. It does not run in CI: on the
2-core development machine one mutant takes 10 s to 3 min (its own tests, else the suite), the whole
list about TIME_NOTE (see the last line of a run).

The environment of the tests: CI=1 (tests that need a tool fail rather than skip), as CI runs them.
"""

import argparse
import io
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time

TIME_NOTE = "see the last run's total"


class Mutant:
    def __init__(self, mid, path, old, new, promise, tests="", equivalent=""):
        self.id, self.path, self.old, self.new = mid, path, old, new
        self.promise, self.tests, self.equivalent = promise, tests, equivalent


M = Mutant

# Each: an id, the file, the exact text and its replacement, the README promise it breaks, and a ctest
# regular expression of the tests expected to catch it (tried first; the whole suite runs when they pass).
MUTANTS = [
]


def check_patterns(mutants, root):
    """The problems of the list against the tree at root: ids, files, texts that do not occur once."""
    problems, seen = [], set()
    for m in mutants:
        if m.id in seen:
            problems.append(f"{m.id}: a second mutant with this id")
        seen.add(m.id)
        if not m.promise:
            problems.append(f"{m.id}: no promise")
        if m.old == m.new:
            problems.append(f"{m.id}: its replacement is its text")
        path = os.path.join(root, m.path)
        try:
            with open(path, encoding="utf-8", newline="") as f:
                count = f.read().count(m.old)
        except OSError as e:
            problems.append(f"{m.id}: cannot read {m.path}: {e.strerror}")
            continue
        if count != 1:
            problems.append(f"{m.id}: its text occurs {count} times in {m.path} (it must occur once)")
    return problems


def run(cmd, cwd, env=None, log=None):
    """Runs cmd in a session of its own; returns (exit status, seconds). Output goes to `log` (a file) or
    is dropped. Interrupted, it ends the whole session (ctest's tests included) before raising."""
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=log or subprocess.DEVNULL,
                         stderr=subprocess.STDOUT if log else subprocess.DEVNULL, start_new_session=True)
    try:
        rc = p.wait()
    except BaseException:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()
        raise
    return rc, time.monotonic() - t0


def failed_tests(build):
    """The names of the tests ctest's last run failed."""
    path = os.path.join(build, "Testing", "Temporary", "LastTestsFailed.log")
    try:
        with open(path) as f:
            return [line.strip().split(":", 1)[-1] for line in f if line.strip()]
    except OSError:
        return []


def ctest(build, jobs, regex=None, exclude=None, env=None, log=None):
    """Runs the tests (those matching regex, less those matching exclude); returns (exit status,
    seconds, the tests that failed)."""
    try:
        os.unlink(os.path.join(build, "Testing", "Temporary", "LastTestsFailed.log"))
    except FileNotFoundError:
        pass
    cmd = ["ctest", "--test-dir", build, "-j", str(jobs), "--timeout", "600", "--output-on-failure"]
    if regex:
        cmd += ["-R", regex]
    if exclude:
        cmd += ["-E", exclude]
    rc, secs = run(cmd, build, env=env, log=log)
    return rc, secs, failed_tests(build) if rc != 0 else []


def test_count(build, regex):
    """How many tests regex selects."""
    out = subprocess.run(["ctest", "--test-dir", build, "-N", "-R", regex], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True).stdout
    for line in out.splitlines():
        if line.startswith("Total Tests:"):
            return int(line.split(":")[1])
    return 0


def sync_tree(src, rev, tree):
    """Makes tree the committed tree rev of the checkout src, writing only the files that differ (so that
    a kept build rebuilds only what changed, and a mutant left by a killed run is undone). Returns the
    commit's id."""
    commit = subprocess.run(["git", "-C", src, "rev-parse", "--verify", rev + "^{commit}"],
                            stdout=subprocess.PIPE, text=True, check=True).stdout.strip()
    archive = subprocess.run(["git", "-C", src, "archive", commit], stdout=subprocess.PIPE, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        for member in tar:
            path = os.path.join(tree, member.name)
            if member.isdir():
                os.makedirs(path, exist_ok=True)
            elif member.issym():
                if not os.path.islink(path) or os.readlink(path) != member.linkname:
                    if os.path.lexists(path):
                        os.unlink(path)
                    os.symlink(member.linkname, path)
            elif member.isfile():
                data = tar.extractfile(member).read()
                try:
                    with open(path, "rb") as f:
                        same = f.read() == data
                except OSError:
                    same = False
                if not same:
                    if os.path.lexists(path):
                        os.unlink(path)
                    with open(path, "wb") as f:
                        f.write(data)
                os.chmod(path, member.mode & 0o777)
    return commit


def main():
    ap = argparse.ArgumentParser(description="plant known bugs one at a time; the tests must catch each")
    ap.add_argument("--list", action="store_true", help="list the mutants and exit")
    ap.add_argument("--check-patterns", action="store_true",
                    help="check that every mutant's text occurs once in this checkout (no build) and exit")
    ap.add_argument("--only", help="comma-separated mutant ids")
    ap.add_argument("--rev", default="HEAD", help="the commit to mutate (default HEAD)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--keep", help="scratch directory to use and keep (else a temporary one, removed); "
                    "a later run with the same one rebuilds only what changed")
    ap.add_argument("--build-type", default="", help="CMAKE_BUILD_TYPE (default: the project's)")
    args = ap.parse_args()

    src = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ids = [m.id for m in MUTANTS]
    chosen = MUTANTS
    if args.only:
        want = args.only.split(",")
        unknown = [w for w in want if w not in ids]
        if unknown:
            print("mutate.py: no mutant " + ", ".join(unknown), file=sys.stderr)
            return 2
        chosen = [m for m in MUTANTS if m.id in want]
    if args.list:
        for m in chosen:
            state = "equivalent: " + m.equivalent if m.equivalent else m.tests or "(whole suite)"
            print(f"{m.id:34} {m.path}  [{state}]\n{'':34} {m.promise}")
        return 0
    if args.check_patterns:
        problems = check_patterns(chosen, src)
        for p in problems:
            print("mutate.py: " + p, file=sys.stderr)
        if not problems:
            print(f"{len(chosen)} mutants, each text found once in {src}")
        return 1 if problems else 0
    if len(set(ids)) != len(ids):
        print("mutate.py: duplicate mutant ids", file=sys.stderr)
        return 2

    scratch = os.path.abspath(args.keep) if args.keep else tempfile.mkdtemp(prefix="vram-mutate-")
    tree, build = os.path.join(scratch, "tree"), os.path.join(scratch, "build")
    logpath = os.path.join(scratch, "mutate.log")
    os.makedirs(tree, exist_ok=True)
    commit = sync_tree(src, args.rev, tree)
    # The tests as CI runs them (CI=1: a test that needs a missing tool fails rather than skips); no
    # bytecode written into the tree, whose sources change within a second of their cached copies.
    env = dict(os.environ, CI="1", PYTHONDONTWRITEBYTECODE="1")
    t_start = time.monotonic()
    caught = survived = errors = skipped = 0
    try:
        with open(logpath, "a") as log:
            # Link-time optimization off: it changes no behaviour, and each mutant relinks the library
            # and everything linked with it (with it on, a relink takes minutes on 2 cores).
            configure = ["cmake", "-S", tree, "-B", build, "-DVRAM_LTO=OFF"]
            if args.build_type:
                configure.append("-DCMAKE_BUILD_TYPE=" + args.build_type)
            if run(configure, scratch, log=log)[0] != 0 or \
                    run(["cmake", "--build", build, "-j", str(args.jobs)], scratch, log=log)[0] != 0:
                print(f"mutate.py: the unmutated tree does not build (see {logpath})", file=sys.stderr)
                return 1
            # The whole suite must pass without a mutant, once per commit for a kept scratch directory.
            stamp = os.path.join(scratch, "baseline-passed")
            try:
                with open(stamp) as f:
                    passed_before = f.read().strip() == commit
            except OSError:
                passed_before = False
            if passed_before:
                print(f"baseline: the suite passed before on {commit[:12]}", flush=True)
            else:
                rc, secs, failed = ctest(build, args.jobs, env=env, log=log)
                if rc != 0:
                    print(f"mutate.py: the unmutated tree fails {', '.join(failed) or 'its tests'} "
                          f"(see {logpath}): fix that first", file=sys.stderr)
                    return 1
                with open(stamp, "w") as f:
                    f.write(commit + "\n")
                print(f"baseline: the suite passes on {commit[:12]} ({secs:.0f} s)", flush=True)

            for m in chosen:
                path = os.path.join(tree, m.path)
                with open(path, encoding="utf-8", newline="") as f:
                    original = f.read()
                count = original.count(m.old)
                if count != 1:
                    errors += 1
                    print(f"{m.id:34} error: its text occurs {count} times in {m.path}", flush=True)
                    continue
                if m.equivalent:
                    skipped += 1
                    print(f"{m.id:34} equivalent ({m.equivalent})", flush=True)
                    continue
                if m.tests and test_count(build, m.tests) == 0:
                    errors += 1
                    print(f"{m.id:34} error: its tests ({m.tests}) match no test", flush=True)
                    continue
                t0 = time.monotonic()
                with open(path, "w", encoding="utf-8", newline="") as f:
                    f.write(original.replace(m.old, m.new, 1))
                try:
                    log.write(f"\n==== {m.id}\n")
                    log.flush()
                    if run(["cmake", "--build", build, "-j", str(args.jobs)], scratch, log=log)[0] != 0:
                        errors += 1
                        print(f"{m.id:34} error: does not build", flush=True)
                        continue
                    rc, by, how = 0, [], ""
                    if m.tests:
                        rc, _, by = ctest(build, args.jobs, regex=m.tests, env=env, log=log)
                    if rc == 0:
                        how = " (not by its own tests)" if m.tests else ""
                        rc, _, by = ctest(build, args.jobs, exclude=m.tests or None, env=env, log=log)
                    secs = time.monotonic() - t0
                    if by:
                        caught += 1
                        print(f"{m.id:34} caught by {', '.join(by[:4])}{' ...' if len(by) > 4 else ''}{how} "
                              f"({secs:.0f} s)", flush=True)
                    elif rc != 0:
                        errors += 1
                        print(f"{m.id:34} error: ctest exited {rc} without naming a failed test (see {logpath})",
                              flush=True)
                    else:
                        survived += 1
                        print(f"{m.id:34} SURVIVED ({secs:.0f} s): {m.promise}", flush=True)
                finally:
                    with open(path, "w", encoding="utf-8", newline="") as f:
                        f.write(original)
            run(["cmake", "--build", build, "-j", str(args.jobs)], scratch, log=log)
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)
    total = time.monotonic() - t_start
    print(f"{caught} caught, {survived} survived, {errors} errors, {skipped} equivalent; "
          f"{total / 60:.0f} min with --jobs {args.jobs}")
    return 0 if survived == 0 and errors == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
