"""python/tests/isolated.py: each test in its own forked process, for the Python tests.

libvram keeps global state (the configuration survives vram.shutdown(), and a started runtime freezes
it), so a test class derived from IsolatedTestCase runs every test* method in a forked child whose vram
environment is the class's ENV (the simulated backend by default); the parent only imports the package.
A SkipTest in the child skips the test in the parent; any other exception, a non-zero exit or a signal
fails it with the child's traceback.
"""
import os
import traceback
import unittest

_SKIP = b"SKIP:"


def run_in_child(test, env):
    """Runs test() in a forked child with `env` as its vram environment; returns (exit code, report)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        code, report = 0, b""
        try:
            for key in [k for k in os.environ if k.startswith("VRAM_SIM") or k.startswith("VRAM_MEMORY")]:
                del os.environ[key]
            os.environ.pop("CUDA_VISIBLE_DEVICES", None)
            os.environ.update(env)
            test()
        except unittest.SkipTest as skip:
            report = _SKIP + str(skip).encode()
        except BaseException:  # noqa: B902 - everything goes back to the parent
            code, report = 1, traceback.format_exc().encode()
        os.write(write_end, report)
        os._exit(code)
    os.close(write_end)
    chunks = iter(lambda: os.read(read_end, 65536), b"")
    report = b"".join(chunks)
    os.close(read_end)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), report


class IsolatedTestCase(unittest.TestCase):
    """Runs each test_* method in its own process with ENV set (on the simulated backend by default)."""
    ENV = {"VRAM_BACKEND": "sim", "VRAM_SIM_DEVICES": "2x16GiB"}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for name in [n for n in vars(cls) if n.startswith("test") and callable(vars(cls)[n])]:
            setattr(cls, name, cls._isolated(getattr(cls, name)))

    @staticmethod
    def _isolated(method):
        def test(self):
            code, report = run_in_child(lambda: method(self), self.ENV)
            if report.startswith(_SKIP):
                self.skipTest(report[len(_SKIP):].decode())
            if code != 0:
                how = "killed by signal %d" % -code if code < 0 else "exit %d" % code
                self.fail("in the child process (%s):\n%s" % (how, report.decode(errors="replace")))
        test.__name__, test.__doc__ = method.__name__, method.__doc__
        return test
