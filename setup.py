"""pip install . / python3 -m build: the Python package vram with the native parts it carries.

What this owns: the build of libvram.so, libvram_preload.so and the vram command with CMake (this
repository's CMakeLists.txt; tests and the Slurm plugin off) inside setuptools' build, and where each goes
in the wheel. The package's metadata is pyproject.toml's; its version is CMakeLists.txt's.

    vram/libvram.so             inside the package: what `import vram` loads first (python/vram/_lib.py)
    vram/include/vram.h         the header vram.torch's allocator library is compiled with
    vram/csrc/*.cpp             (package data) vram.torch's allocator library's sources
    <prefix>/bin/vram           the wheel's data: the layout `cmake --install` gives, so `vram` is on the
    <prefix>/lib/libvram_preload.so      environment's PATH (venv, --user, /usr/local) and finds the
    <prefix>/share/vram/snapshot_to_trace.py   preload library in ../lib and the converter in ../share/vram
                                (tools/run.c, tools/report.c)

The wheel is tagged py3-none-<platform>: native code, none of it tied to Python's ABI (ctypes loads it).
The build happens under build/pip (setuptools' build folder; CMake's own tree in its temp folder there).
Environment: CMAKE (the cmake to run), CMAKE_ARGS (more CMake options, e.g. -DVRAM_LTO=OFF),
CMAKE_BUILD_PARALLEL_LEVEL (build jobs; every CPU otherwise). An editable install (pip install -e) is
refused, with what to do instead: the native parts would not follow the checkout.
"""
import os
import re
import shlex
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py

try:  # setuptools 70.1 and later have their own; before, the wheel package's (Debian: python3-wheel)
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:
    try:
        from wheel.bdist_wheel import bdist_wheel
    except ImportError:  # an sdist needs neither
        bdist_wheel = None

ROOT = os.path.dirname(os.path.abspath(__file__))
CMAKE_MINIMUM = (3, 20)


def project_version():
    """project(vram VERSION x.y.z) in CMakeLists.txt: the one place the version is written."""
    with open(os.path.join(ROOT, "CMakeLists.txt"), encoding="utf-8") as f:
        found = re.search(r"project\(vram VERSION ([0-9][0-9.]*)", f.read())
    if not found:
        raise SystemExit("vram: CMakeLists.txt has no project(vram VERSION ...) line")
    return found.group(1)


def cmake_command():
    """The cmake to run, checked for CMAKE_MINIMUM; SystemExit with what to install otherwise."""
    cmake = os.environ.get("CMAKE") or "cmake"
    path = shutil.which(cmake)
    if path is None:
        raise SystemExit("vram: building the package needs CMake %d.%d or later and a C compiler: %s not found "
                         "(Debian: apt-get install cmake build-essential)" % (CMAKE_MINIMUM + (cmake,)))
    out = subprocess.run([path, "--version"], stdout=subprocess.PIPE, universal_newlines=True).stdout
    found = re.search(r"version ([0-9]+)\.([0-9]+)", out)
    if found and tuple(map(int, found.groups())) < CMAKE_MINIMUM:
        raise SystemExit("vram: %s is CMake %s.%s; the build needs %d.%d or later"
                         % ((path,) + found.groups() + CMAKE_MINIMUM))
    return path


class BuildPy(build_py):
    """build_py, then CMake's build of the native parts into the build folder."""

    def run(self):
        if getattr(self, "editable_mode", False):   # (pip install -e: setuptools 64 and later)
            raise SystemExit("vram: pip install -e is not supported: libvram.so, the vram command and "
                             "libvram_preload.so are CMake's, outside the package. Use pip install . (again after "
                             "a change), or the checkout as it is: cmake -S . -B build && cmake --build build, then "
                             "PYTHONPATH=python (the package finds build/libvram.so)")
        super().run()
        self.build_native()

    def build_native(self):
        cmake = cmake_command()
        tree = os.path.join(self.get_finalized_command("build").build_temp, "cmake")
        configure = [cmake, "-S", ROOT, "-B", tree, "-DCMAKE_BUILD_TYPE=Release", "-DVRAM_BUILD_TESTS=OFF",
                     "-DVRAM_BUILD_SPANK=OFF", "-DVRAM_BUILD_TOOLS=ON"] + shlex.split(os.environ.get("CMAKE_ARGS", ""))
        build = [cmake, "--build", tree, "--target", "vram_shared", "vram", "vram_preload"]
        if not os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL"):   # (cmake reads it itself when set)
            build += ["--parallel", str(os.cpu_count() or 1)]
        for command in (configure, build):
            self.announce("running " + " ".join(command), level=2)
            subprocess.check_call(command)

        package = os.path.join(self.build_lib, "vram")
        os.makedirs(os.path.join(package, "include"), exist_ok=True)
        # libvram.so.0.x.y itself (libvram.so is a link to it), under the name _lib.py looks for
        self.copy_file(os.path.realpath(os.path.join(tree, "libvram.so")), os.path.join(package, "libvram.so"))
        self.copy_file(os.path.join(ROOT, "include", "vram.h"), os.path.join(package, "include", "vram.h"))
        # The command and what it finds relative to itself: the wheel's data (installed under the
        # environment's prefix). install_data reads the list when install runs, after this build.
        self.distribution.data_files = [
            ("bin", [os.path.join(tree, "vram")]),
            ("lib", [os.path.join(tree, "libvram_preload.so")]),
            ("share/vram", [os.path.join(ROOT, "tools", "snapshot_to_trace.py")]),
        ]


cmdclass = {"build_py": BuildPy}

if bdist_wheel is not None:
    class BdistWheel(bdist_wheel):
        """A platform wheel (native files inside) for any Python 3: py3-none-<platform>."""

        def finalize_options(self):
            super().finalize_options()
            self.root_is_pure = False

        def get_tag(self):
            _, _, platform = super().get_tag()
            return "py3", "none", platform

    cmdclass["bdist_wheel"] = BdistWheel

setup(
    version=project_version(),
    cmdclass=cmdclass,
    options={"build": {"build_base": os.path.join("build", "pip")}},
)
