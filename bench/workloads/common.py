"""bench/workloads/common.py: what the workload modules share (standard library only): Skipped
(an optional module is missing: not the allocator's failure), need() (import or Skipped), Driven (a
loop a framework runs) and StepClock, the step timer of the framework programs' callbacks, with the
rules of train_worker.time_steps. No state beyond one StepClock's own; no locks.
"""
import time


class Skipped(Exception):
    """The workload cannot run here (a missing optional module); not a failure of the allocator."""


def need(module, what):
    import importlib
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise Skipped("%s is not installed (%s)" % (what, e))


class Driven:
    """A workload whose loop a framework runs: run(sync, warmup, steps, sample) trains warmup + steps
    steps and returns the timed steps' wall times in ms, measured by the framework's own callback API
    (synchronize at the step's start and end, sample() after it, as time_steps does)."""

    def __init__(self, run):
        self.run = run


class StepClock:
    """The step timer the programs' callbacks call: begin() and end() around each step."""

    def __init__(self, sync, warmup, sample, clock=time.perf_counter):
        self.sync, self.warmup, self.sample, self.clock = sync, warmup, sample, clock
        self.n, self.t0, self.times = 0, None, []

    def begin(self):
        self.sync()
        self.t0 = self.clock()

    def end(self):
        if self.t0 is None:
            return
        self.sync()
        t1 = self.clock()
        if self.sample is not None:
            self.sample()
        if self.n >= self.warmup:
            self.times.append((t1 - self.t0) * 1e3)
        self.n += 1
        self.t0 = None
