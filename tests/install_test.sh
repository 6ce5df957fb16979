#!/usr/bin/env bash
# Installs the build into a temporary prefix P (manual pages included) and builds the example against
# the installed package: with pkg-config's flags, and as a CMake project using find_package(vram). What the README
# says for a prefix outside the loader's and CMake's paths is checked: the pkg-config program runs with
# LD_LIBRARY_PATH=P/lib, linked with -Wl,-rpath,$(pkg-config --variable=libdir vram), and (as root)
# once ldconfig knows P/lib; find_package(vram) finds P through CMAKE_PREFIX_PATH or through P/bin on PATH.
# Usage: install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$2
work=$(mktemp -d)
ldconf=/etc/ld.so.conf.d/vram-install-test-$$.conf   # (as root: the ldconfig check's, removed at exit)
trap 'rm -rf "$work"; if [ -e "$ldconf" ]; then rm -f "$ldconf"; ldconfig; fi' EXIT
pass=0 fail=0
check() {  # check NAME COMMAND...
  local name=$1; shift
  if "$@" >"$work/out" 2>&1; then echo "ok      $name"; pass=$((pass + 1))
  else echo "FAILED  $name"; sed 's/^/  /' "$work/out"; fail=$((fail + 1)); fi
}
export VRAM_BACKEND=sim
prefix=$work/prefix
check "cmake --install" cmake --install "$build" --prefix "$prefix"
for f in include/vram.h lib/libvram.a lib/libvram.so lib/libvram_preload.so lib/pkgconfig/vram.pc lib/cmake/vram/vramConfig.cmake bin/vram; do
  check "installed $f" test -e "$prefix/$f"
done
check "installed vram runs" "$prefix/bin/vram" ls
for page in man1/vram.1 man3/libvram.3; do   # (gzip-compressed where the build found gzip)
  check "installed share/man/$page" bash -c 'test -e "$1.gz" || test -e "$1"' _ "$prefix/share/man/$page"
done
if command -v man >/dev/null; then
  check "man finds the installed vram(1) and libvram(3)" \
    bash -c 'man -M "$1/share/man" -w vram | grep -q "^$1/share/man/man1/vram\.1" &&
             man -M "$1/share/man" -w 3 libvram | grep -q "^$1/share/man/man3/libvram\.3"' _ "$prefix"
fi
if command -v python3 >/dev/null; then  # the Python package finds the libvram.so of its installation
  check "installed python package imports" env -u VRAM_LIBRARY PYTHONPATH="$prefix/lib/python3/dist-packages" \
    python3 -c 'import sys, vram; assert vram._lib.path.startswith(sys.argv[1]), vram._lib.path; print(vram.diagnose())' "$prefix"
fi

pc() { PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config "$@"; }
if command -v pkg-config >/dev/null; then
  cflags=$(pc --cflags vram) libs=$(pc --libs vram)
else  # pkg-config is not installed: read the same fields from the file
  dir=$prefix/lib/pkgconfig
  cflags="-I$dir/../../include" libs="-L$dir/../../lib -lvram"
  check "vram.pc names -lvram" grep -q -- '-lvram' "$dir/vram.pc"
fi
if command -v pkg-config >/dev/null; then   # vram.pc finds its prefix from where it lies
  pc_dirs() { [ "$(realpath -m "$(pc --variable=libdir vram)")" = "$prefix/lib" ] &&
              [ "$(realpath -m "$(pc --variable=includedir vram)")" = "$prefix/include" ]; }
  check "vram.pc's libdir and includedir are the installation's" pc_dirs
fi
check "example builds with the pkg-config flags" cc -std=c11 $cflags "$src/examples/config_template.c" $libs -o "$work/ex_pc"
check "example runs against the installed library with LD_LIBRARY_PATH=P/lib" env LD_LIBRARY_PATH="$prefix/lib" "$work/ex_pc"
libdir=$prefix/lib
if command -v pkg-config >/dev/null; then libdir=$(pc --variable=libdir vram); fi
check "example linked with -Wl,-rpath,\$(pkg-config --variable=libdir vram) runs without LD_LIBRARY_PATH" \
  sh -c "cc -std=c11 $cflags '$src/examples/config_template.c' $libs -Wl,-rpath,'$libdir' -o '$work/ex_rpath' &&
         env -u LD_LIBRARY_PATH '$work/ex_rpath'"
if [ "$(id -u)" -eq 0 ] && command -v ldconfig >/dev/null && [ -d /etc/ld.so.conf.d ]; then
  echo "$prefix/lib" >"$ldconf"
  check "example runs once ldconfig knows P/lib" sh -c "ldconfig && env -u LD_LIBRARY_PATH '$work/ex_pc'"
  rm -f "$ldconf"; ldconfig
fi

mkdir -p "$work/consumer"
cat >"$work/consumer/CMakeLists.txt" <<CM
cmake_minimum_required(VERSION 3.16)
project(consumer C)
find_package(vram 0.1 REQUIRED)
add_executable(ex "$src/examples/config_template.c")
target_link_libraries(ex PRIVATE vram::vram)
CM
check "find_package(vram) configures" cmake -S "$work/consumer" -B "$work/consumer/build" -DCMAKE_PREFIX_PATH="$prefix"
check "find_package(vram) builds" cmake --build "$work/consumer/build"
check "find_package(vram) example runs" "$work/consumer/build/ex"
check "find_package(vram) finds P through P/bin on PATH" sh -c "
  PATH='$prefix/bin':\$PATH cmake -S '$work/consumer' -B '$work/consumer/build-path' >/dev/null &&
  grep -qx 'vram_DIR:PATH=$prefix/lib/cmake/vram' '$work/consumer/build-path/CMakeCache.txt'"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
