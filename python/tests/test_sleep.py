"""Tests of vram.tag, vram.sleep and vram.wake on the simulated GPU backend (whose device memory is host
memory, so the tests read and write blocks with ctypes), each test in its own forked process.

Run: PYTHONPATH=python VRAM_LIBRARY=build/libvram.so python3 -m unittest discover -s python/tests -v
"""
import ctypes
import os
import subprocess
import sys
import tempfile
import threading
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))

import vram  # noqa: E402
from vram import config  # noqa: E402
from isolated import IsolatedTestCase  # noqa: E402  (python/tests/isolated.py)

MIB = 1 << 20
GIB = 1 << 30


def write(ptr, data):
    ctypes.memmove(ptr, data, len(data))


def read(ptr, n):
    return ctypes.string_at(ptr, n)


class TagTest(IsolatedTestCase):
    """vram.tag: thread-local, nestable, checked."""

    def test_nesting_restores_the_tag_before(self):
        self.assertIsNone(vram.get_tag())
        with vram.tag("weights") as name:
            self.assertEqual(name, "weights")
            self.assertEqual(vram.get_tag(), "weights")
            with vram.tag("kv"):
                self.assertEqual(vram.get_tag(), "kv")
                with vram.tag(None):
                    self.assertIsNone(vram.get_tag())
                self.assertEqual(vram.get_tag(), "kv")
            self.assertEqual(vram.get_tag(), "weights")
        self.assertIsNone(vram.get_tag())
        self.assertFalse(vram.is_initialized())          # (a tag needs no runtime)

    def test_tag_is_the_threads_own(self):
        seen = []
        with vram.tag("main"):
            t = threading.Thread(target=lambda: seen.append(vram.get_tag()))
            t.start()
            t.join()
            self.assertEqual(vram.get_tag(), "main")
        self.assertEqual(seen, [None])

    def test_tag_restored_after_an_exception(self):
        with self.assertRaises(KeyError):
            with vram.tag("w"):
                raise KeyError("x")
        self.assertIsNone(vram.get_tag())

    def test_bad_tags(self):
        with self.assertRaisesRegex(TypeError, "tag must be a string or None, not 5"):
            vram.tag(5)
        with self.assertRaisesRegex(TypeError, "tag must be a string or None"):
            vram.sleep(0, b"w")
        with self.assertRaisesRegex(ValueError, "a tag holds no NUL character"):
            vram.tag("a\x00b")
        with self.assertRaisesRegex(ValueError, "a tag is not empty"):
            with vram.tag(""):
                pass
        with self.assertRaisesRegex(ValueError, "printable ASCII"):
            with vram.tag("poids\u00e9"):
                pass
        with self.assertRaisesRegex(ValueError, "at most 63 bytes"):
            with vram.tag("x" * 64):
                pass
        self.assertIsNone(vram.get_tag())


class SleepTest(IsolatedTestCase):
    """vram.sleep / vram.wake on a growing simulated card."""
    ENV = {"VRAM_BACKEND": "sim", "VRAM_SIM_DEVICES": "16GiB", "VRAM_MEMORY_LIMIT": "1GiB",
           "VRAM_FORCE_ALLOW_GROWTH": "true", "VRAM_ALLOC_CONF": "map_ahead_mb:0"}

    def test_offload_wakes_at_the_same_address_with_the_bytes(self):
        with vram.tag("weights"):
            w = vram.malloc(8 * MIB)
        u = vram.malloc(2 * MIB)
        write(w, b"weights!" * 1000)
        write(u, b"untagged")
        vram.sleep(0, "weights")
        info = config.get_memory_info_full(0)
        self.assertEqual((info["asleep_bytes"], info["asleep_host_bytes"]), (8 * MIB, 8 * MIB))
        self.assertEqual(info["reserved"], 2 * MIB)
        self.assertEqual(info["current"], 10 * MIB)
        self.assertEqual(read(u, 8), b"untagged")
        vram.wake(0, "weights")
        self.assertEqual(read(w, 8000), b"weights!" * 1000)
        info = config.get_memory_info_full("GPU:0")
        self.assertEqual((info["asleep_bytes"], info["asleep_host_bytes"], info["reserved"]), (0, 0, 10 * MIB))
        vram.free(w)
        vram.free(u)

    def test_discard_and_everything(self):
        with vram.tag("kv"):
            kv = vram.malloc(4 * MIB)
        u = vram.malloc(2 * MIB)
        write(kv, b"kv cache")
        vram.sleep(0, offload=False)                       # every block of the device
        info = config.get_memory_info_full(0)
        self.assertEqual((info["asleep_bytes"], info["asleep_host_bytes"], info["reserved"]), (6 * MIB, 0, 0))
        with self.assertRaisesRegex(vram.OutOfMemoryError, "the memory of the blocks without a tag is asleep"):
            vram.malloc(MIB)
        vram.wake(0)
        self.assertNotEqual(read(kv, 8), b"kv cache")      # dropped
        vram.free(kv)
        vram.free(u)

    def test_errors(self):
        with vram.tag("w"):
            w = vram.malloc(24 * MIB)
        with self.assertRaisesRegex(TypeError, "offload must be True or False, not 1"):
            vram.sleep(0, "w", offload=1)
        with self.assertRaisesRegex(ValueError, "no allocation was ever made under the tag 'never'"):
            vram.sleep(0, "never")
        with self.assertRaisesRegex(ValueError, "Unrecognized device"):
            vram.wake(3, "w")
        vram.sleep(0, "w")
        with vram.tag("w"):
            with self.assertRaisesRegex(vram.OutOfMemoryError, "the memory of the tag 'w' is asleep"):
                vram.malloc(MIB)
        big = vram.malloc(1010 * MIB)                      # the limit has room while w sleeps
        with self.assertRaises(vram.OutOfMemoryError) as refused:
            vram.wake(0, "w")
        self.assertIn("cannot wake the tag 'w'", str(refused.exception))
        self.assertIn("nothing is lost", str(refused.exception))
        self.assertEqual(config.get_memory_info_full(0)["asleep_bytes"], 24 * MIB)
        vram.free(big)
        vram.wake(0, "w")
        vram.free(w)


class SleepPreallocatedTest(IsolatedTestCase):
    """A preallocated pool cannot keep addresses without their memory: it says so."""
    ENV = {"VRAM_BACKEND": "sim", "VRAM_SIM_DEVICES": "16GiB", "VRAM_MEMORY_LIMIT": "256MiB"}

    def test_refused_with_the_reason(self):
        with vram.tag("w"):
            w = vram.malloc(MIB)
        with self.assertRaises(vram.VramError) as refused:
            vram.sleep(0, "w")
        self.assertEqual(refused.exception.status, "VRAM_ERR_UNSUPPORTED")
        self.assertIn("preallocates its memory (memory growth is off)", str(refused.exception))
        vram.free(w)


_OTHER = r"""
import sys
sys.path.insert(0, sys.argv[1])
import vram
try:
    p = vram.malloc("12GiB")
except vram.OutOfMemoryError as e:
    print("refused:", e)
else:
    vram.free(p)
    print("allocated")
"""


class TwoProcessesTest(IsolatedTestCase):
    """Two programs that each need most of a card take turns on it: one sleeps, the other runs, the
    first wakes with its weights as they were (the simulated card shared between processes)."""
    ENV = {"VRAM_BACKEND": "sim", "VRAM_SIM_DEVICES": "16GiB", "VRAM_MEMORY_LIMIT": "13GiB",
           "VRAM_FORCE_ALLOW_GROWTH": "true"}

    def _other(self):
        package = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir)
        done = subprocess.run([sys.executable, "-c", _OTHER, package], capture_output=True, text=True, timeout=60)
        self.assertEqual(done.returncode, 0, done.stderr)
        return done.stdout.strip()

    def test_take_turns_on_one_card(self):
        with tempfile.TemporaryDirectory() as tmp:
            os.environ["VRAM_SIM_SHARED"] = os.path.join(tmp, "cards")
            with vram.tag("weights"):
                w = vram.malloc(64 * MIB)
            with vram.tag("kv"):
                kv = vram.malloc(11 * GIB)                 # (never written: no host memory behind it)
            write(w, bytes(range(256)) * 1024)
            self.assertIn("refused: out of memory", self._other())   # the card is this process's
            self.assertIn("the card itself is full", self._other())
            vram.sleep(0, "weights")                       # the weights to host memory,
            vram.sleep(0, "kv", offload=False)             # the cache dropped
            self.assertEqual(self._other(), "allocated")   # the other program has the card
            vram.wake(0)
            self.assertEqual(read(w, 256 * 1024), bytes(range(256)) * 1024)
            vram.free(w)
            vram.free(kv)


if __name__ == "__main__":
    unittest.main()
