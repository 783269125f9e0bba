#!/usr/bin/env python3
"""A link with latency between two network namespaces, for kernels without tc netem (this
VM's has none): a TUN device in each namespace, and this process moving every packet from
one to the other after DELAY microseconds, both ways. Started by scripts/netns_cluster;
runs until killed (the devices go with it).

  netns_delay.py NS0 NS1 DELAY_US DEV0 DEV1   (then configure DEV0 in NS0 and DEV1 in NS1)
"""
from __future__ import annotations

import ctypes
import fcntl
import heapq
import os
import select
import struct
import sys
import time

CLONE_NEWNET = 0x40000000
TUNSETIFF = 0x400454CA
IFF_TUN, IFF_NO_PI = 0x0001, 0x1000
libc = ctypes.CDLL(None, use_errno=True)


def tun_in(ns: str, name: str) -> int:
    """Opens TUN device `name` inside namespace `ns` (the fd keeps working from any namespace)."""
    home = os.open("/proc/self/ns/net", os.O_RDONLY)
    target = os.open(f"/run/netns/{ns}", os.O_RDONLY)
    if libc.setns(target, CLONE_NEWNET) != 0:
        sys.exit(f"setns {ns}: {os.strerror(ctypes.get_errno())}")
    fd = os.open("/dev/net/tun", os.O_RDWR)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TUN | IFF_NO_PI))
    libc.setns(home, CLONE_NEWNET)
    os.close(home)
    os.close(target)
    os.set_blocking(fd, False)
    return fd


def main() -> None:
    ns0, ns1, delay_us, dev0, dev1 = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4], sys.argv[5]
    a, b = tun_in(ns0, dev0), tun_in(ns1, dev1)
    other = {a: b, b: a}
    delay = delay_us / 1e6
    queue: list[tuple[float, int, int, bytes]] = []
    seq = 0
    print("ready", flush=True)
    while True:
        timeout = max(0.0, queue[0][0] - time.monotonic()) if queue else None
        ready, _, _ = select.select([a, b], [], [], timeout)
        now = time.monotonic()
        for fd in ready:
            while True:
                try:
                    pkt = os.read(fd, 65536)
                except BlockingIOError:
                    break
                seq += 1
                heapq.heappush(queue, (now + delay, seq, other[fd], pkt))
        now = time.monotonic()
        while queue and queue[0][0] <= now:
            _, _, fd, pkt = heapq.heappop(queue)
            try:
                os.write(fd, pkt)
            except OSError:
                pass  # a full queue drops the packet, as a link would


if __name__ == "__main__":
    main()
