#!/usr/bin/env python3
"""bench/granules.py: how many 2 MiB granules a placement policy needs for a trace, as a model.

    python3 bench/granules.py TRACE [FRACTION] [POLICY ...]
    python3 bench/granules.py --self-test     (a hand-made trace whose counts are worked out below)

A model, not an allocator: it replays TRACE (traces/*.trace.gz) through one placement policy in
two address zones (requests of 256 KiB or less in a small zone placed by best fit, the rest by
POLICY), rounds requests to 256 B, and counts the granules that live bytes touch, as if a granule no
live byte touches were given back at once and a touched one cost nothing to map. So its figures are
a lower bound on what that policy costs an allocator that maps whole granules (vram under a limit
maps one granule at a time). The limit is ceil(peak live / FRACTION) bytes (default 0.995, as
`BENCH_FRACTION` in bench/limit.sh), in whole granules.

Policies (default: all but "alias-always", which is slow):
  bf            best fit (smallest free chunk that holds the request, its front), vram's placement
  ff            first fit (lowest address)
  bump          always at the top (a new address)
  fb            best fit's chunk, its front or its back, whichever touches fewer new granules
  bmin          among all free chunks, front or back, the place touching fewest new granules
  alias-limit   best fit; when that would go over the limit, the request instead gets a new
                address whose first granule is mapped to the physical granule with the longest free
                tail and whose last to the one with the longest free head (one physical granule
                mapped at two addresses, the live bytes apart), new granules between
  alias-always  the same aliasing whenever it touches fewer new granules than best fit

Prints one line per policy: the peak granules touched, the granules the limit holds, the first
event over it and how many requests went over (a model has no failure: it counts them).
"""
import bisect, gzip, math, sys

G = 2 << 20
UNIT = 256
SMALL = 256 << 10


def load(path):
    ev = []
    with gzip.open(path, 'rt') as f:
        for line in f:
            if line[0] == '#':
                continue
            p = line.split()
            ev.append((1, int(p[1]), int(p[2])) if p[0] == 'a' else (0, int(p[1]), 0))
    return ev


class Zone:
    """Free chunks by start (the top, everything above `top`, is free too) and live bytes per granule."""

    def __init__(self):
        self.starts, self.size, self.top, self.ref = [], {}, 0, {}

    def free(self, a, s):
        i = bisect.bisect_left(self.starts, a)
        if i > 0 and self.starts[i - 1] + self.size[self.starts[i - 1]] == a:
            i -= 1
            a = self.starts.pop(i)
            s += self.size.pop(a)
        if i < len(self.starts) and self.starts[i] == a + s:
            s += self.size.pop(self.starts.pop(i))
        if a + s == self.top:
            self.top = a
        else:
            self.starts.insert(i, a)
            self.size[a] = s

    def chunk_of(self, a):
        i = bisect.bisect_right(self.starts, a) - 1
        return self.starts[i] if i >= 0 and a < self.starts[i] + self.size[self.starts[i]] else None

    def take(self, a, r, chunk):
        if chunk is None:
            if a > self.top:
                self.free(self.top, a - self.top)
            self.top = a + r
            return
        s = self.size.pop(chunk)
        i = bisect.bisect_left(self.starts, chunk)
        self.starts.pop(i)
        if a > chunk:
            self.starts.insert(i, chunk)
            self.size[chunk] = a - chunk
            i += 1
        if a + r < chunk + s:
            self.starts.insert(i, a + r)
            self.size[a + r] = chunk + s - a - r

    def new_granules(self, a, r):
        return sum(1 for g in range(a // G, (a + r - 1) // G + 1) if self.ref.get(g, 0) == 0)

    def touch(self, a, r, d):
        n = 0
        for g in range(a // G, (a + r - 1) // G + 1):
            v = self.ref.get(g, 0) + d
            if v:
                self.ref[g] = v
            else:
                del self.ref[g]
            n += (d > 0 and v == 1) - (d < 0 and v == 0)
        return n

    def ends(self):
        """(free tail length, its address) of touched granules whose free bytes run to their end, and
        (free head length, the granule's address) of those whose free bytes start at their start."""
        tails, heads = [], []
        for a, s in [(a, self.size[a]) for a in self.starts] + [(self.top, None)]:
            g = a // G
            if a % G and self.ref.get(g, 0) and (s is None or a + s >= (g + 1) * G):
                tails.append((G - a % G, a))
            if s is not None and (a + s) % G and self.ref.get((a + s) // G, 0) and a <= (a + s) // G * G:
                heads.append(((a + s) % G, (a + s) // G * G))
        return tails, heads


def best_fit(z, r):
    best = min((a for a in z.starts if z.size[a] >= r), key=lambda a: z.size[a], default=None)
    return (z.top, None) if best is None else (best, best)


def first_fit(z, r):
    return next(((a, a) for a in z.starts if z.size[a] >= r), (z.top, None))


def front_back(z, r):
    x, c = best_fit(z, r)
    if c is None:
        return x, c
    back = c + z.size[c] - r
    return (back, c) if z.new_granules(back, r) < z.new_granules(c, r) else (c, c)


def min_new(z, r):
    cands = [(z.new_granules(z.top, r), 1 << 62, z.top, None)]
    for a in z.starts:
        s = z.size[a]
        if s >= r:
            cands += [(z.new_granules(x, r), s, x, a) for x in {a, a + s - r}]
    return min(cands)[2:]


PLACE = {'bf': best_fit, 'ff': first_fit, 'bump': lambda z, r: (z.top, None), 'fb': front_back, 'bmin': min_new,
         'alias-limit': best_fit, 'alias-always': best_fit}


def alias_place(zones, r):
    """The aliased place: (new granules between, [(zone, address, bytes)] taken in touched granules)."""
    tails = [(t, a, z) for z in zones for t, a in z.ends()[0]]
    heads = [(h, a, z) for z in zones for h, a in z.ends()[1]]
    if not tails or not heads:
        return None
    t, ta, zt = max(tails, key=lambda v: v[0])
    h, ha, zh = max(heads, key=lambda v: v[0])
    if r <= t or ta // G == ha // G and zt is zh:
        return None
    mid = max(0, -(-(r - t - h) // G))
    pieces = [(zt, ta, t)]
    if r - t - mid * G > 0:
        pieces.append((zh, ha, r - t - mid * G))
    return mid, pieces


def run(ev, policy, limit_g):
    zones = [Zone(), Zone()]
    live, touched, mid, peak, over, first = {}, 0, 0, 0, 0, None
    for i, (is_alloc, id_, size) in enumerate(ev):
        if not is_alloc:
            v = live.pop(id_, None)
            if v is not None:
                for z, a, s in v[0]:
                    touched += z.touch(a, s, -1)
                    z.free(a, s)
                mid -= v[1]
            continue
        r = -(-size // UNIT) * UNIT
        z = zones[0] if r <= SMALL else zones[1]
        x, c = (PLACE[policy] if z is zones[1] else best_fit)(z, r)
        pieces, k = [(z, x, r)], 0
        n = z.new_granules(x, r)
        if policy.startswith('alias') and (policy == 'alias-always' or touched + mid + n > limit_g):
            alt = alias_place(zones, r)
            if alt is not None and alt[0] < n:
                k, pieces = alt
                c = 'alias'
        for zz, a, s in pieces:
            zz.take(a, s, zz.chunk_of(a) if c == 'alias' else c)
            touched += zz.touch(a, s, 1)
        mid += k
        live[id_] = (pieces, k)
        peak = max(peak, touched + mid)
        if touched + mid > limit_g:
            over += 1
            first = i if first is None else first
    return peak, over, first


def self_test():
    """Large requests (over 256 KiB), in MiB: A 3 at 0-3 (granules 0, 1), B 1 at 3-4 (granule 1), C 3 at
    4-7 (granules 2, 3); B freed; D 1 and E 1. Best fit puts D in B's place (3-4) and E at the top
    (7-8, granule 3): 4 granules. Bump puts D at 7-8 (granule 3) and E at 8-9 (granule 4): 5. First
    fit is best fit here: 4. Peak live 8 MiB, so at FRACTION 1 the limit holds 4 granules and bump goes
    over it once, at E (event 5). alias-limit: before E, granules 1 and 3 are touched with no free head
    anywhere (the only free bytes run to the top), so it has no aliased place and is best fit: 4."""
    M = 1 << 20
    ev = [(1, 1, 3 * M), (1, 2, M), (1, 3, 3 * M), (0, 2, 0), (1, 4, M), (1, 5, M)]
    want = {'bf': (4, 0, None), 'ff': (4, 0, None), 'bump': (5, 1, 5), 'alias-limit': (4, 0, None)}
    bad = [(p, run(ev, p, 4), w) for p, w in want.items() if run(ev, p, 4) != w]
    for p, got, w in bad:
        print(f"granules self-test: {p}: (peak, over, first) {got}, expected {w}")
    if not bad:
        print("granules self-test: ok")
    return 1 if bad else 0


def main():
    if sys.argv[1:] == ['--self-test']:
        sys.exit(self_test())
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    ev = load(sys.argv[1])
    frac = float(sys.argv[2]) if len(sys.argv) > 2 else 0.995
    policies = sys.argv[3:] or [p for p in PLACE if p != 'alias-always']
    cur = peak_live = 0
    sizes = {}
    for is_alloc, id_, size in ev:
        if is_alloc:
            sizes[id_] = size
            cur += size
            peak_live = max(peak_live, cur)
        elif id_ in sizes:
            cur -= sizes.pop(id_)
    limit_g = math.ceil(peak_live / frac) // G
    for pol in policies:
        peak, over, first = run(ev, pol, limit_g)
        print(f"{sys.argv[1].split('/')[-1]} {pol}: peak {peak} granules, limit {limit_g}, peak live "
              f"{peak_live / G:.3f}, over the limit {over} requests (first at event {first})", flush=True)


if __name__ == '__main__':
    main()
