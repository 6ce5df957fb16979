"""Tests of how vram.torch builds its C++ (python/vram/torch.py, python/vram/csrc/), without PyTorch.

PyTorch cannot be installed here, so this checks what does not need it: the C++ lies in csrc/ and none in
the package's Python; the CUDA headers of the "allocator" mode are found where NVIDIA's pip wheels, Triton
and a CUDA toolkit keep them (folders laid out as they are, made in a temporary directory) and, when they
are not, the reason names each missing header and the pip command that brings it. Last, install()'s
choice of mode and what it hands torch.utils.cpp_extension, over a stand-in `torch` package that records
the calls (the real build is checked on the GPU machine: tests/gpu_run_check.sh, python/tests/gpu_frameworks.py).

Run: PYTHONPATH=python VRAM_LIBRARY=build/libvram.so python3 -m unittest python/tests/test_torch_build.py -v
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import textwrap
import unittest

PYTHON_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir)
sys.path.insert(0, PYTHON_DIR)

import vram.torch as vt  # noqa: E402

PACKAGE = os.path.dirname(os.path.abspath(vt.__file__))


def write(path, text=""):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def runtime_headers(include, version):
    """cuda_runtime_api.h and cuda.h of CUDA `version` (12080: 12.8), as nvidia-cuda-runtime's include/ has them."""
    write(os.path.join(include, "cuda_runtime_api.h"), "#define CUDART_VERSION  %d\n#include \"crt/host_defines.h\"\n" % version)
    write(os.path.join(include, "cuda.h"), "#define CUDA_VERSION %d\n" % version)


def crt_headers(include):
    """crt/host_defines.h, as nvidia-cuda-nvcc's include/ has it."""
    write(os.path.join(include, "crt", "host_defines.h"), "#define __host__\n")


class SourcesTest(unittest.TestCase):
    """The C++ is in csrc/, and each file defines the entry torch.py calls."""

    def test_no_cpp_in_the_python(self):
        for name in sorted(os.listdir(PACKAGE)):
            if name.endswith(".py"):
                with open(os.path.join(PACKAGE, name)) as f:
                    text = f.read()
                for marker in ("#include <", "PYBIND11_MODULE", "namespace {"):
                    self.assertFalse(marker in text, "C++ in %s: %r" % (name, marker))

    def test_sources_define_what_torch_py_calls(self):
        for source, entry in (("allocator.cpp", "install"), ("forwarder.cpp", "bind")):
            path = vt._source(source)
            self.assertEqual(os.path.dirname(path), os.path.join(PACKAGE, "csrc"))
            with open(path) as f:
                text = f.read()
            self.assertRegex(text, r'PYBIND11_MODULE\(TORCH_EXTENSION_NAME, m\) \{\s*m\.def\("%s", ' % entry)
            self.assertRegex(text, r"\nbool %s\(const std::string &path\) \{" % entry)
            with open(vt.__file__) as f:
                self.assertIn("module.%s(_lib.path)" % entry, f.read())

    def test_missing_source_is_named(self):
        with self.assertRaisesRegex(RuntimeError, r"csrc/nothing\.cpp is missing from the vram package \(reinstall vram\)"):
            vt._source("nothing.cpp")


class HeadersTest(unittest.TestCase):
    """_cuda_headers: where the allocator library's CUDA headers come from, or exactly why none."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.site = os.path.join(self.tmp.name, "site-packages")
        self.runtime = os.path.join(self.site, "nvidia", "cuda_runtime", "include")
        self.nvcc = os.path.join(self.site, "nvidia", "cuda_nvcc", "include")
        self.triton = os.path.join(self.site, "triton", "backends", "nvidia", "include")

    def tearDown(self):
        self.tmp.cleanup()

    def test_nothing_found(self):
        self.assertEqual(vt._cuda_headers("12.8", None, []), (None, (
            "it needs CUDA 12.8's cuda_runtime_api.h, cuda.h, crt/host_defines.h, found neither in NVIDIA's pip "
            "wheels (none installed) nor in a CUDA toolkit (none: CUDA_HOME unset, no nvcc on PATH, no "
            "/usr/local/cuda). Install: pip install \"nvidia-cuda-runtime-cu12==12.8.*\" "
            "\"nvidia-cuda-nvcc-cu12==12.8.*\" (or set CUDA_HOME to a CUDA 12.8 toolkit)")))

    def test_runtime_wheel_without_crt(self):
        # a stock pip PyTorch: nvidia-cuda-runtime-cu12's headers, no crt/
        runtime_headers(self.runtime, 12080)
        self.assertEqual(vt._cuda_headers("12.8", None, [self.runtime]), (None, (
            "it needs CUDA 12.8's crt/host_defines.h, found neither in NVIDIA's pip wheels (%s) nor in a CUDA "
            "toolkit (none: CUDA_HOME unset, no nvcc on PATH, no /usr/local/cuda). Install: pip install "
            "\"nvidia-cuda-nvcc-cu12==12.8.*\" (or set CUDA_HOME to a CUDA 12.8 toolkit)"
            % os.path.join(self.site, "nvidia", "*", "include"))))

    def test_runtime_and_nvcc_wheels(self):
        runtime_headers(self.runtime, 12080)
        crt_headers(self.nvcc)
        self.assertEqual(vt._cuda_headers("12.8", None, [self.nvcc, self.runtime]), ("wheels", [self.runtime, self.nvcc]))

    def test_other_major_version_is_not_taken(self):
        runtime_headers(self.runtime, 13000)
        crt_headers(self.nvcc)
        headers, why = vt._cuda_headers("12.4", None, [self.nvcc, self.runtime])
        self.assertIsNone(headers)
        self.assertIn("needs CUDA 12.4's cuda_runtime_api.h, cuda.h, found neither", why)
        self.assertIn('pip install "nvidia-cuda-runtime-cu12==12.4.*" (or', why)

    def test_triton_copy(self):
        runtime_headers(self.triton, 12080)
        crt_headers(self.triton)
        self.assertEqual(vt._cuda_headers("12.6", None, [self.triton]), ("wheels", [self.triton]))

    def test_cuda_13_names(self):
        headers, why = vt._cuda_headers("13.0", None, [])
        self.assertIn('pip install "nvidia-cuda-runtime==13.0.*" "nvidia-cuda-crt==13.0.*"', why)

    def test_toolkit_first_when_of_torch_major(self):
        toolkit = os.path.join(self.tmp.name, "cuda")
        runtime_headers(os.path.join(toolkit, "include"), 12020)
        crt_headers(os.path.join(toolkit, "include"))
        runtime_headers(self.runtime, 12080)
        crt_headers(self.nvcc)
        self.assertEqual(vt._cuda_headers("12.8", toolkit, [self.runtime, self.nvcc]), ("toolkit", []))
        # a toolkit of another major version: the wheels'
        runtime_headers(os.path.join(toolkit, "include"), 11080)
        self.assertEqual(vt._cuda_headers("12.8", toolkit, [self.runtime, self.nvcc]), ("wheels", [self.runtime, self.nvcc]))
        headers, why = vt._cuda_headers("12.8", toolkit, [])
        self.assertIn("nor in a CUDA toolkit (%s/include: not all of them, or not CUDA 12)" % toolkit, why)

    def test_a_real_toolkit(self):
        # the version macros as a CUDA toolkit's headers write them, where this machine has one
        toolkit = os.environ.get("CUDA_HOME") or "/usr/local/cuda"
        api = os.path.join(toolkit, "include", "cuda_runtime_api.h")
        if not os.path.isfile(api):
            self.skipTest("no CUDA toolkit at %s" % toolkit)
        major = vt._header_major(api, "CUDART_VERSION")
        self.assertIsNotNone(major)
        self.assertEqual(vt._header_major(os.path.join(toolkit, "include", "cuda.h"), "CUDA_VERSION"), major)
        self.assertEqual(vt._cuda_headers("%d.0" % major, toolkit, []), ("toolkit", []))
        headers, why = vt._cuda_headers("%d.0" % (major - 1), toolkit, [])
        self.assertIsNone(headers)
        self.assertIn("%s/include: not all of them, or not CUDA %d" % (toolkit, major - 1), why)

    def test_without_cuda(self):
        self.assertEqual(vt._cuda_headers(None, None, []), (None, (
            "this PyTorch is built without CUDA (torch.version.cuda is None): install a CUDA build of PyTorch")))

    def test_found_on_sys_path(self):
        # the wheels found through sys.path as pip lays them out (the nvidia namespace package, triton)
        runtime_headers(self.runtime, 12080)
        crt_headers(self.nvcc)
        write(os.path.join(self.site, "nvidia", "cublas", "include", "cublas.h"))
        write(os.path.join(self.site, "nvidia", "__init__.py"))
        write(os.path.join(self.site, "triton", "__init__.py"), "raise SystemExit('triton must not be imported')\n")
        os.makedirs(self.triton)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([self.site, PYTHON_DIR]))
        out = subprocess.run([sys.executable, "-c", "import json, vram.torch as vt; print(json.dumps(["
                              "vt._wheel_include_dirs(), vt._cuda_headers('12.8', None)]))"],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
        self.assertEqual(out.returncode, 0, out.stderr)
        dirs, headers = json.loads(out.stdout)
        cublas = os.path.join(self.site, "nvidia", "cublas", "include")
        self.assertEqual(dirs, [cublas, self.nvcc, self.runtime, self.triton])
        self.assertEqual(headers, ["wheels", [self.runtime, self.nvcc]])


class ToolchainTest(unittest.TestCase):
    """_toolchain_missing: a C++ compiler, named with what to install (ninja is not needed)."""

    def test_nothing_on_path(self):
        env = {"PATH": "/nonexistent", "CXX": ""}
        self.assertEqual(self._missing(env), ["no C++ compiler (c++ is not on PATH: apt-get install g++, or set CXX)"])

    def test_cxx_named(self):
        self.assertIn("no C++ compiler (/nonexistent/g++-99 -O2 is not on PATH: apt-get install g++, or set CXX)",
                      self._missing({"CXX": "/nonexistent/g++-99 -O2"}))

    def test_found(self):
        with tempfile.TemporaryDirectory() as bin_dir:
            for tool in ("c++",):
                write(os.path.join(bin_dir, tool), "#!/bin/sh\n")
                os.chmod(os.path.join(bin_dir, tool), 0o755)
            self.assertEqual(self._missing({"PATH": bin_dir, "CXX": ""}), [])

    @staticmethod
    def _missing(env):
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            return vt._toolchain_missing()
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


# A stand-in for PyTorch: what install() touches, each call recorded in $CALLS (a JSON line each).
FAKE_TORCH = {
    "torch/__init__.py": """
        import json, os, types
        from . import cuda, version, utils
        __version__ = "2.11.0+fake"
        _C = types.SimpleNamespace(_GLIBCXX_USE_CXX11_ABI=True)
        def record(*what):
            with open(os.environ["CALLS"], "a") as f:
                f.write(json.dumps(what) + "\\n")
        """,
    "torch/version.py": "import os\ncuda = os.environ.get('TORCH_CUDA') or None\n",
    "torch/cuda/__init__.py": "from . import memory\ndef is_initialized():\n    return False\n",
    "torch/cuda/memory.py": """
        class CUDAPluggableAllocator:
            def __init__(self, path, alloc, free):
                self.args = (path, alloc, free)
        def change_current_allocator(allocator):
            import torch
            torch.record("change_current_allocator", *allocator.args)
        """,
    "torch/utils/__init__.py": "from . import cpp_extension\n",
    "torch/utils/cpp_extension.py": """
        import os, types
        CUDA_HOME = os.environ.get("FAKE_CUDA_HOME") or None
        def include_paths():
            return ["/torch/include", "/torch/include/torch/csrc/api/include"]
        def library_paths():
            return ["/torch/lib"]
        def load(name, sources, **kwargs):
            import torch
            torch.record("load", name, sources, kwargs)
            if name in os.environ.get("FAIL_BUILD", "").split(","):
                raise RuntimeError("x.cpp:1:1: error: something went wrong")
            module = types.SimpleNamespace(__file__="/ext/%s.so" % name)
            module.install = module.bind = lambda path: True
            return module
        """,
}


class InstallTest(unittest.TestCase):
    """install() over the stand-in PyTorch: which mode, what it builds with, and what it says."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.site = os.path.join(self.tmp.name, "site-packages")
        for path, text in FAKE_TORCH.items():
            write(os.path.join(self.site, path), textwrap.dedent(text))
        self.bin = os.path.join(self.tmp.name, "bin")
        for tool in ("c++", "ninja"):   # (found on PATH; with ninja, the stand-in's load builds nothing)
            write(os.path.join(self.bin, tool), "#!/bin/sh\nexit 1\n")
            os.chmod(os.path.join(self.bin, tool), 0o755)
        self.calls = os.path.join(self.tmp.name, "calls")

    def tearDown(self):
        self.tmp.cleanup()

    def install(self, path=None, **env):
        """Runs vram.torch.install() in a child; returns (mode, the warning or None, the recorded calls)."""
        child_env = dict(os.environ, PYTHONPATH=os.pathsep.join([self.site, PYTHON_DIR]), CALLS=self.calls,
                         PATH=path or self.bin, CXX="", TORCH_CUDA="12.8", **env)
        code = ("import json, warnings, vram.torch as vt\n"
                "with warnings.catch_warnings(record=True) as w:\n"
                "    warnings.simplefilter('always')\n"
                "    vt.install()\n"
                "print(json.dumps([vt.mode, str(w[0].message) if w else None]))\n")
        out = subprocess.run([sys.executable, "-c", code], env=child_env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, universal_newlines=True)
        self.assertEqual(out.returncode, 0, out.stderr)
        calls = []
        if os.path.exists(self.calls):
            with open(self.calls) as f:
                calls = [json.loads(line) for line in f]
        return json.loads(out.stdout) + [calls]

    def test_allocator_from_the_wheels(self):
        runtime = os.path.join(self.site, "nvidia", "cuda_runtime", "include")
        nvcc = os.path.join(self.site, "nvidia", "cuda_nvcc", "include")
        runtime_headers(runtime, 12080)
        crt_headers(nvcc)
        mode, warning, calls = self.install()
        self.assertEqual((mode, warning), ("allocator", None))
        self.assertEqual(len(calls), 1, calls)
        what, name, sources, kwargs = calls[0]
        self.assertEqual((what, name, sources), ("load", "vram_torch_allocator", [os.path.join(PACKAGE, "csrc", "allocator.cpp")]))
        self.assertIs(kwargs["with_cuda"], False)
        self.assertEqual(kwargs["extra_include_paths"][1:], [runtime, nvcc])
        self.assertTrue(os.path.isfile(os.path.join(kwargs["extra_include_paths"][0], "vram.h")))
        self.assertEqual(kwargs["extra_ldflags"], ["-ldl", "-lc10_cuda", "-ltorch_cuda"])

    def test_allocator_from_a_toolkit(self):
        toolkit = os.path.join(self.tmp.name, "cuda")
        runtime_headers(os.path.join(toolkit, "include"), 12080)
        crt_headers(os.path.join(toolkit, "include"))
        mode, warning, calls = self.install(FAKE_CUDA_HOME=toolkit)
        self.assertEqual((mode, warning), ("allocator", None))
        self.assertIs(calls[0][3]["with_cuda"], True)
        self.assertEqual(calls[0][3]["extra_ldflags"], ["-ldl"])

    def test_forwarder_says_what_to_install(self):
        runtime_headers(os.path.join(self.site, "nvidia", "cuda_runtime", "include"), 12080)
        mode, warning, calls = self.install()
        self.assertEqual(mode, "forwarder")
        self.assertEqual(len(calls), 2, calls)   # the allocator library not tried
        self.assertEqual(calls[0][:3], ["load", "vram_torch_forwarder", [os.path.join(PACKAGE, "csrc", "forwarder.cpp")]])
        self.assertEqual(calls[1], ["change_current_allocator", "/ext/vram_torch_forwarder.so", "vram_torch_alloc",
                                    "vram_torch_free"])
        self.assertRegex(warning, r"^vram\.torch: PyTorch calls vram through CUDAPluggableAllocator \(mode 'forwarder'\): "
                                  r"vram's allocator library cannot build: it needs CUDA 12\.8's crt/host_defines\.h, found "
                                  r"neither in NVIDIA's pip wheels \(.*/nvidia/\*/include\) nor in a CUDA toolkit "
                                  r"\(none: CUDA_HOME unset, no nvcc on PATH, no /usr/local/cuda\)\. Install: pip install "
                                  r"\"nvidia-cuda-nvcc-cu12==12\.8\.\*\" \(or set CUDA_HOME to a CUDA 12\.8 toolkit\)\. "
                                  r"Until then tensor\.record_stream does nothing and torch\.cuda\.memory_stats\(\) raises$")

    def test_failed_build_says_where_the_headers_came_from(self):
        toolkit = os.path.join(self.tmp.name, "cuda")
        runtime_headers(os.path.join(toolkit, "include"), 12080)
        crt_headers(os.path.join(toolkit, "include"))
        mode, warning, calls = self.install(FAKE_CUDA_HOME=toolkit, FAIL_BUILD="vram_torch_allocator")
        self.assertEqual(mode, "forwarder")
        self.assertIn("vram's allocator library did not build with CUDA's headers from CUDA_HOME=%s "
                      "(x.cpp:1:1: error: something went wrong)" % toolkit, warning)

    def without_ninja(self, compiler):
        """install() with no ninja on PATH and `compiler` as c++ (it gets $ARGS); returns install()'s answer and
        the compiler's command lines, one list each."""
        os.remove(os.path.join(self.bin, "ninja"))
        write(os.path.join(self.bin, "c++"), "#!/bin/sh\nprintf '%s\\n' \"$@\" >>\"$ARGS\"\necho ===== >>\"$ARGS\"\n"
              + compiler)
        args = os.path.join(self.tmp.name, "args")
        answer = self.install(ARGS=args, XDG_CACHE_HOME=os.path.join(self.tmp.name, "cache"))
        with open(args) as f:
            return answer, [cmd.split("\n")[:-1] for cmd in f.read().split("=====\n")[:-1]]

    def test_without_ninja_vram_runs_the_compiler(self):
        runtime = os.path.join(self.site, "nvidia", "cuda_runtime", "include")
        runtime_headers(runtime, 12080)
        crt_headers(os.path.join(self.site, "nvidia", "cuda_nvcc", "include"))
        (mode, warning, calls), commands = self.without_ninja("echo 'x.cpp:1:1: error: boom'\nexit 1\n")
        self.assertEqual([c for c in calls if c[0] == "load"], [])   # (torch's load needs ninja: not called)
        self.assertEqual(mode, "direct")
        self.assertEqual(len(commands), 2, commands)   # the allocator library, then the forwarder
        cmd = commands[0]
        for flag in ("-DTORCH_EXTENSION_NAME=vram_torch_allocator", "-D_GLIBCXX_USE_CXX11_ABI=1", "-fPIC", "-shared",
                     "-isystem/torch/include", "-I" + runtime, os.path.join(PACKAGE, "csrc", "allocator.cpp"),
                     "-L/torch/lib", "-lc10_cuda", "-ltorch_cuda", "-ltorch_python", "-o"):
            self.assertIn(flag, cmd)
        self.assertTrue(os.path.isfile(os.path.join(cmd[cmd.index("-I" + runtime) - 1][2:], "vram.h")))
        self.assertEqual(os.path.dirname(cmd[-1]), os.path.join(self.tmp.name, "cache", "vram", "torch_extensions"))
        self.assertIn("-DTORCH_EXTENSION_NAME=vram_torch_forwarder", commands[1])
        self.assertIn("vram's allocator library did not build with CUDA's headers from %s" % runtime, warning)
        self.assertIn("c++ (exit 1, no ninja: vram ran the compiler): x.cpp:1:1: error: boom", warning)
        self.assertEqual(os.listdir(os.path.dirname(cmd[-1])), [])   # (the failed build's file removed)

    def test_without_ninja_a_compiler_that_writes_nothing(self):
        (mode, warning, calls), commands = self.without_ninja("exit 0\n")
        self.assertEqual(mode, "direct")
        self.assertIn("the forwarder did not build (c++ (exit 0, no ninja: vram ran the compiler): it wrote nothing)",
                      warning)

    def test_direct_without_a_compiler(self):
        os.remove(os.path.join(self.bin, "c++"))
        mode, warning, calls = self.install()
        self.assertEqual(mode, "direct")
        self.assertEqual(len(calls), 1, calls)   # nothing built
        self.assertEqual(calls[0][0::2], ["change_current_allocator", "vram_plugin_alloc"])
        self.assertRegex(calls[0][1], r"libvram\.so")
        self.assertIn("(mode 'direct'): no C++ compiler (c++ is not on PATH: apt-get install g++, or set CXX). Until "
                      "then tensor.record_stream does nothing and torch.cuda.memory_stats() raises, and a refused "
                      "request gives a null tensor instead of torch.OutOfMemoryError", warning)

if __name__ == "__main__":
    unittest.main()
