#!/usr/bin/env bash
# deb_checks.sh WORK PACKAGE...: run by deb_test.sh as root in the system the Debian packages go into (an
# overlay of / entered with chroot, or the machine itself): installs WORK/debs/*.deb with apt-get, checks
# the installation (see deb_test.sh), purges PACKAGE... and checks that none of their files is left.
# WORK is a scratch directory. Prints each check, then "N passed, N failed"; exit status 1 on a failure.
set -uo pipefail
work=$1; shift
pass=0 fail=0
check() {  # check NAME COMMAND...
  local name=$1; shift
  if "$@" >"$work/out" 2>&1; then echo "ok      $name"; pass=$((pass + 1))
  else echo "FAILED  $name"; sed 's/^/  /' "$work/out" | tail -30; fail=$((fail + 1)); fi
}
export DEBIAN_FRONTEND=noninteractive VRAM_BACKEND=sim
unset LD_LIBRARY_PATH VRAM_LIBRARY PYTHONPATH PKG_CONFIG_PATH CMAKE_PREFIX_PATH
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
apt_opts=()
if grep -qs '^path-exclude=/usr/share/man' /etc/dpkg/dpkg.cfg.d/*; then   # (Debian's slim images)
  echo "note: dpkg excludes /usr/share/man here (/etc/dpkg/dpkg.cfg.d); vram's pages are included for the man checks"
  apt_opts+=(-o 'DPkg::Options::=--path-include=/usr/share/man/man[13]/*vram*')
fi
check "apt-get install ./*.deb" apt-get install -y --no-install-recommends "${apt_opts[@]}" "$work"/debs/*.deb
check "vram --version" bash -c '[ "$(command -v vram)" = /usr/bin/vram ] && vram --version | grep -qE "^vram [0-9]+\.[0-9]+\.[0-9]+$"'
check "vram ls (simulated GPU)" vram ls
check "vram run preloads /usr/lib/$multiarch/libvram_preload.so" \
  bash -c 'vram run --limit 1G -- sh -c "echo \$LD_PRELOAD" | grep -qx "/usr/lib/$0/libvram_preload.so"' "$multiarch"
check "Debian's python3 imports vram, which loads /usr/lib/$multiarch/libvram.so.0" \
  /usr/bin/python3 -c 'import sys, vram; p = vram._lib.path; assert p.startswith("/usr/lib/" + sys.argv[1] + "/libvram.so"), p; print(vram.config.list_physical_devices("GPU"))' "$multiarch"
check "vram.torch finds vram.h of libvram-dev in /usr/include (to build its allocator library)" \
  /usr/bin/python3 -c 'import vram.torch as t; d = t._include_dir(); assert d == "/usr/include", d'
check "man -w vram finds vram(1)" bash -c 'man -w vram | grep -qx "/usr/share/man/man1/vram.1.gz"'
check "man -w 3 libvram finds libvram(3)" bash -c 'man -w 3 libvram | grep -qx "/usr/share/man/man3/libvram.3.gz"'
check "man vram renders" bash -c 'MANWIDTH=80 man vram 2>&1 | grep -q "vram - GPU memory runtime"'
cat >"$work/app.c" <<'C'
#include <stdio.h>
#include <vram.h>
int main(void) {
    void *p = NULL;
    vram_status s = vram_malloc(&p, 1 << 20, 0);
    if (s != VRAM_OK) { fprintf(stderr, "vram_malloc: %s: %s\n", vram_status_name(s), vram_last_error()); return 1; }
    printf("vram %s allocated %p\n", vram_version_string(), p);
    return vram_free(p) == VRAM_OK ? 0 : 1;
}
C
check "pkg-config: libdir /usr/lib/$multiarch, includedir /usr/include" \
  bash -c '[ "$(realpath -m "$(pkg-config --variable=libdir vram)")" = "/usr/lib/$0" ] &&
           [ "$(realpath -m "$(pkg-config --variable=includedir vram)")" = /usr/include ]' "$multiarch"
check "a C program builds with \$(pkg-config --cflags --libs vram)" \
  bash -c 'cc -std=c11 -o "$0/app" "$0/app.c" $(pkg-config --cflags --libs vram)' "$work"
check "it runs without LD_LIBRARY_PATH, on /usr/lib/$multiarch/libvram.so.0 (/lib: merged /usr)" \
  bash -c '"$0/app" | grep -q "^vram [0-9.]* allocated 0x" && ldd "$0/app" | grep -qE "libvram.so.0 => (/usr)?/lib/$1/libvram.so.0 "' "$work" "$multiarch"
mkdir -p "$work/consumer"
printf 'cmake_minimum_required(VERSION 3.16)\nproject(consumer C)\nfind_package(vram 0.1 REQUIRED)\nadd_executable(app app.c)\ntarget_link_libraries(app PRIVATE vram::vram)\n' >"$work/consumer/CMakeLists.txt"
cp "$work/app.c" "$work/consumer/"
check "a CMake project finds vram (find_package) and runs" \
  bash -c 'cmake -S "$0" -B "$0/b" && cmake --build "$0/b" && "$0/b/app"' "$work/consumer"
check "vram-slurm: plugstack.conf.d/vram.conf is a conffile" \
  bash -c 'dpkg-query --showformat="\${Conffiles}" --show vram-slurm | grep -q "/etc/slurm/plugstack.conf.d/vram.conf"'
sed -n 's/^#\(optional vram.so\)$/\1/p' /etc/slurm/plugstack.conf.d/vram.conf >"$work/plugstack.conf"
printf 'ClusterName=t\nSlurmctldHost=localhost\nPlugStackConfig=%s/plugstack.conf\nNodeName=localhost CPUs=1\nPartitionName=p Nodes=localhost Default=YES\n' "$work" >"$work/slurm.conf"
check "srun --help offers --vram-limit with vram.conf's line enabled (vram.so in Slurm's PluginDir)" \
  bash -c 'grep -qx "optional vram.so" "$0/plugstack.conf" && SLURM_CONF="$0/slurm.conf" srun --help 2>&1 | grep -q -- "--vram-limit=SIZE"' "$work"
dpkg -L "$@" | sort -u | while read -r f; do [ -d "$f" ] || echo "$f"; done >"$work/files"
check "apt-get purge" apt-get purge -y "$@"
check "no vram package is left" bash -c '! dpkg -l "$@" 2>/dev/null | grep -q "^[a-z]i"' _ "$@"
check "no file of theirs is left ($(wc -l <"$work/files") files, the conffile included)" \
  bash -c 'grep -q /etc/slurm/plugstack.conf.d/vram.conf "$0" || exit 1; left=0
           while read -r f; do if [ -e "$f" ] || [ -L "$f" ]; then echo "left: $f"; left=1; fi; done <"$0"; exit $left' \
  "$work/files"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
