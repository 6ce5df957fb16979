#!/usr/bin/env bash
# Installs the build into a temporary prefix (manual pages included) and builds the example against the
# installed package twice: with pkg-config's flags, and as a CMake project using find_package(vram).
# Usage: install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
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
check "example runs against the installed library" env LD_LIBRARY_PATH="$prefix/lib" "$work/ex_pc"

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
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
