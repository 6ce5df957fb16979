#!/usr/bin/env bash
# The Debian packages: builds them from a fresh build directory configured for /usr (cpack -G DEB),
# installs them with apt-get as a user would (apt-get install ./*.deb), checks what an installation must
# do, and purges them. They go into a copy-on-write copy of this machine's root (an overlay of / in a
# private mount namespace, entered with chroot), thrown away at the end; where that cannot be made (no
# overlayfs, /usr or /var on a mount of their own) and CI is set, into the machine itself, refusing to
# touch a vram package installed before.
#
# Checks, in the installed system: vram --version and vram ls (simulated GPU); vram run puts
# /usr/lib/<triplet>/libvram_preload.so in LD_PRELOAD; Debian's python3 imports vram, which loads
# libvram.so.0 of /usr/lib/<triplet>, and vram.torch finds vram.h in /usr/include; man -w finds vram(1) and libvram(3); a C program built with
# pkg-config's flags runs without LD_LIBRARY_PATH, and a CMake project finds vram with find_package;
# srun --help offers --vram-limit with the line of /etc/slurm/plugstack.conf.d/vram.conf enabled (Slurm
# finds vram.so in its PluginDir); apt-get purge removes every file.
# Needs root, cpack, dpkg-shlibdeps (dpkg-dev), apt-get, man (man-db), pkg-config, python3 and Slurm's
# srun and headers: skipped (77) without them, unless CI is set (then it fails: .ci/run installs them).
# Usage: deb_test.sh SOURCE_DIR
set -euo pipefail
src=$(cd "$1" && pwd)
skip() {
  if [ -n "${CI:-}" ]; then echo "FAILED  $1 (CI is set: .ci/run installs what this test needs)"; exit 1; fi
  echo "skipped: $1"; exit 77
}
[ "$(id -u)" -eq 0 ] || skip "needs root (apt-get install)"
for c in cpack dpkg-shlibdeps apt-get dpkg man pkg-config python3 srun cc; do
  command -v "$c" >/dev/null || skip "$c is not installed"
done
[ -f /usr/include/slurm/spank.h ] || skip "slurm/spank.h is not installed (libslurm-dev)"
packages=(vram libvram0 libvram-dev python3-vram vram-slurm)

work=$(mktemp -d /tmp/vram-deb.XXXXXX)
chmod 755 "$work"
checks=$work/checks.sh
cp "$src/tests/deb_checks.sh" "$checks"
cleanup() { rm -rf "$work"; }
trap cleanup EXIT
start=$SECONDS
echo "== building the packages in $work/build (cmake -DCMAKE_INSTALL_PREFIX=/usr, cpack -G DEB)"
if ! { cmake -S "$src" -B "$work/build" -DCMAKE_INSTALL_PREFIX=/usr -DCMAKE_BUILD_TYPE=RelWithDebInfo \
         -DVRAM_BUILD_TESTS=OFF && cmake --build "$work/build" -j"$(nproc)" &&
       (cd "$work/build" && cpack -G DEB); } >"$work/build.log" 2>&1; then
  tail -40 "$work/build.log"; echo "FAILED  the packages build"; exit 1
fi
mkdir "$work/debs" && mv "$work"/build/*.deb "$work/debs/"
echo "built in $((SECONDS - start)) s: $(cd "$work/debs" && echo *.deb)"
for p in "${packages[@]}"; do
  ls "$work/debs/${p}_"*.deb >/dev/null 2>&1 || { echo "FAILED  no package $p"; exit 1; }
done


# Into an overlay of / in a private mount namespace, else (CI) this machine.
overlay_ok=1
for d in /usr /var /etc; do mountpoint -q "$d" && overlay_ok=0; done
mkdir -p "$work/ov/upper" "$work/ov/work" "$work/ov/root"
run_in_overlay() {
  unshare -m --propagation private bash -c '
    set -e
    ov=$1; work=$2; shift 2
    mount -t overlay overlay -o "lowerdir=/,upperdir=$ov/upper,workdir=$ov/work" "$ov/root"
    for d in proc sys dev; do mount --rbind "/$d" "$ov/root/$d"; done
    mkdir -p "$ov/root$work" && mount --bind "$work" "$ov/root$work"   # (/tmp may be a mount of its own)
    exec chroot "$ov/root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 CI="${CI:-}" \
      bash "$work/checks.sh" "$work" "$@"' _ "$work/ov" "$work" "$@"
}
if [ "$overlay_ok" -eq 1 ] && unshare -m --propagation private bash -c \
     'mount -t overlay overlay -o "lowerdir=/,upperdir=$1/upper,workdir=$1/work" "$1/root"' _ "$work/ov" 2>"$work/ov.err"; then
  echo "== installing into an overlay of / (thrown away afterwards)"
  rc=0; run_in_overlay "${packages[@]}" || rc=$?
else
  why=$(cat "$work/ov.err" 2>/dev/null || true); [ "$overlay_ok" -eq 1 ] || why="/usr, /var or /etc is a mount of its own"
  [ -n "${CI:-}" ] || skip "no overlay of / to install into ($why); CI installs into the machine itself"
  for p in "${packages[@]}"; do
    if dpkg -s "$p" >/dev/null 2>&1; then echo "FAILED  $p is installed already: not touching it"; exit 1; fi
  done
  echo "== installing into this machine (no overlay: $why); purged afterwards"
  rc=0; env CI="${CI:-}" bash "$checks" "$work" "${packages[@]}" || rc=$?
fi
echo "deb test: $((SECONDS - start)) s"
exit "$rc"
