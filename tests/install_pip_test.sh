#!/usr/bin/env bash
# `pip install` of vram, offline, with Debian's python3 and build tools (python3-venv, python3-setuptools,
# python3-wheel, python3-build): from a checkout into a venv (--system-site-packages, for setuptools and
# wheel, with --no-build-isolation), and from the sdist `python3 -m build` makes (its wheel built from the
# unpacked sdist) into a plain venv and into a user base (pip install --user). Each time, with no PYTHONPATH
# or VRAM_LIBRARY: `import vram` loads the libvram.so inside the installed package and runs the README's
# tf.config template on the simulated card; `vram` on the environment's PATH runs (--version, ls, and
# `vram run`, which finds libvram_preload.so in ../lib); vram.torch's C++ sources are in the package and
# torch.py holds none. `pip uninstall` removes the command and the preload library too; `pip install -e`
# is refused with what to do instead.
# Usage: install_pip_test.sh SOURCE_DIR. Python: $VRAM_TEST_PYTHON, else Debian's /usr/bin/python3.
# Skipped (77) without those packages, failing instead where CI is set (.ci/run installs them).
set -euo pipefail
src=$(cd "$1" && pwd)
py=${VRAM_TEST_PYTHON:-/usr/bin/python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}
unset PYTHONPATH VRAM_LIBRARY PIP_USER PYTHONUSERBASE VIRTUAL_ENV
export PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1   # offline: nothing from PyPI

# (the first venv is made here: it fails without python3-venv's ensurepip)
missing=()
[[ -x $py ]] || missing+=("$py")
if [[ ${#missing[@]} -eq 0 ]]; then
  "$py" -m venv --system-site-packages "$work/venv" >"$work/venv.log" 2>&1 || missing+=(python3-venv)
  for m in setuptools:python3-setuptools wheel:python3-wheel build:python3-build; do
    "$py" -c "import ${m%%:*}" 2>/dev/null || missing+=("${m#*:}")
  done
fi
if [[ ${#missing[@]} -gt 0 ]]; then
  if [[ -n ${CI:-} ]]; then echo "FAILED  missing: ${missing[*]}"; exit 1; fi
  echo "skipped: missing ${missing[*]}"; exit 77
fi

pass=0 fail=0
check() {  # check NAME COMMAND...
  local name=$1; shift
  if "$@" >"$work/out" 2>&1; then echo "ok      $name"; pass=$((pass + 1))
  else echo "FAILED  $name"; sed 's/^/  /' "$work/out" | tail -40; fail=$((fail + 1)); fi
}
elapsed() { local t0=$1; echo $(( $(date +%s) - t0 )); }

# The checkout, copied (the build writes build/pip and python/vram.egg-info into the tree it builds): the
# files git knows or would add, else everything but build directories.
mkdir "$work/src"
if git -C "$src" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  (cd "$src" && git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$work/src" 2>/dev/null || true)
else
  (cd "$src" && tar --exclude='./build*' -cf - .) | tar -xf - -C "$work/src"
fi

# The README's tf.config template on the simulated card, in the installed package (not a source tree).
template='
import os, sys, vram
assert os.path.realpath(vram._lib.path).startswith(os.path.realpath(sys.argv[1])), vram._lib.path
assert os.path.basename(vram._lib.path) == "libvram.so", vram._lib.path
gpus = vram.config.list_physical_devices("GPU")
assert gpus, vram.diagnose()
vram.config.set_visible_devices(gpus[0], "GPU")
vram.config.experimental.set_memory_growth(gpus[0], True)
vram.config.set_logical_device_configuration(gpus[0], [vram.config.LogicalDeviceConfiguration(memory_limit=64)])
ptr = vram.malloc("16MiB")
info = vram.config.experimental.get_memory_info("GPU:0")
assert info["current"] >= 16 << 20, info
vram.free(ptr)
print(vram.__version__, vram.config.list_logical_devices("GPU"), info)
'
torch_sources='
import os, sys, vram.torch
here = os.path.dirname(vram.torch.__file__)
for f in ("csrc/allocator.cpp", "csrc/forwarder.cpp", "include/vram.h"):
    assert os.path.isfile(os.path.join(here, f)), f
assert vram.torch._include_dir() == os.path.realpath(os.path.join(here, "include")), vram.torch._include_dir()
text = open(vram.torch.__file__).read()
assert "#include" not in text and "PYBIND11_MODULE" not in text, "C++ in torch.py"
'

# check_installed LABEL PYTHON SITE BIN: the package, the template and the command of one installation.
check_installed() {
  local label=$1 python=$2 site=$3 bin=$4
  check "$label: import vram runs the tf.config template (libvram.so from $site)" \
    env -C "$work" VRAM_BACKEND=sim "$python" -c "$template" "$site"
  check "$label: vram.torch's C++ is in the package, not in torch.py" env -C "$work" "$python" -c "$torch_sources"
  check "$label: vram is on PATH" test "$(PATH=$bin:$PATH command -v vram)" = "$bin/vram"
  check "$label: vram --version" env PATH="$bin:$PATH" sh -c 'vram --version | grep -q "vram 0\."'
  check "$label: vram ls" env PATH="$bin:$PATH" VRAM_BACKEND=sim vram ls
  check "$label: vram run finds libvram_preload.so" env PATH="$bin:$PATH" \
    vram run --growth -- sh -c 'case "$LD_PRELOAD" in */libvram_preload.so*) ;; *) exit 1 ;; esac'
  check "$label: vram report's converter in ../share/vram" test -f "$bin/../share/vram/snapshot_to_trace.py"
}

# 1. pip install from the checkout (offline: setuptools and wheel are Debian's, seen through
#    --system-site-packages), into a fresh venv.
t0=$(date +%s)
check "pip install --no-build-isolation CHECKOUT" "$work/venv/bin/pip" install --no-build-isolation "$work/src"
echo "        (pip install from the checkout: $(elapsed "$t0") s)"
site=$("$work/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')
check_installed venv "$work/venv/bin/python" "$site" "$work/venv/bin"
check "pip uninstall" "$work/venv/bin/pip" uninstall -y vram
check "pip uninstall removed bin/vram and lib/libvram_preload.so" \
  test ! -e "$work/venv/bin/vram" -a ! -e "$work/venv/lib/libvram_preload.so"
check "pip install -e: refused, saying what to do instead (the native parts would not follow the checkout)" sh -c "
  ! '$work/venv/bin/pip' install --no-build-isolation -e '$work/src' >'$work/editable.log' 2>&1 &&
  grep -q 'vram: pip install -e is not supported' '$work/editable.log' && ! test -e '$work/venv/bin/vram'"

# 2. The sdist, and its wheel built from the unpacked sdist (python3 -m build does both); this build
#    without link-time optimization through CMAKE_ARGS (a quicker build, and the option passed through).
t0=$(date +%s)
check "python3 -m build --no-isolation (sdist, then its wheel)" \
  env CMAKE_ARGS=-DVRAM_LTO=OFF "$py" -m build --no-isolation --outdir "$work/dist" "$work/src"
echo "        (sdist and its wheel: $(elapsed "$t0") s)"
wheel=$(ls "$work"/dist/vram-*.whl 2>/dev/null | head -1 || true)
check "the wheel is tagged py3-none-<platform> (ctypes, no Python ABI)" \
  sh -c "case '$(basename "${wheel:-none}")' in vram-*-py3-none-linux_*.whl) ;; *) exit 1 ;; esac"
check "the sdist holds no build output" sh -c "! tar -tzf $work/dist/vram-*.tar.gz | grep -E '/build/|\\.so|\\.o$'"

#    into a plain venv (its own pip; installing a wheel needs no setuptools or wheel)
"$py" -m venv "$work/plain"
check "pip install WHEEL into a plain venv" "$work/plain/bin/pip" install "$wheel"
site=$("$work/plain/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')
check_installed "plain venv" "$work/plain/bin/python" "$site" "$work/plain/bin"

# 3. pip install --user (a user base of its own; Debian's python3 is externally managed: the flag that
#    says this is meant)
export PYTHONUSERBASE=$work/userbase
check "pip install --user WHEEL" "$py" -m pip install --user --break-system-packages "$wheel"
site=$("$py" -c 'import site; print(site.getusersitepackages())')
check_installed "--user" "$py" "$site" "$work/userbase/bin"
unset PYTHONUSERBASE

echo "$pass passed, $fail failed"
[[ $fail -eq 0 ]]
