#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A faulty wire between two network devices: forwards every Ethernet frame that arrives on one to
the other, after dropping, delaying and reordering some, like `tc netem` (which kernels without
sch_netem lack). Run it in the namespace that holds both devices (the switch of
scripts/netns-lib.sh), in place of a bridge between them.

    netns-wire.py DEV_A DEV_B [--loss PERCENT] [--delay MS] [--jitter MS] [--reorder PERCENT]
                  [--seed N]

--loss drops that share of frames, each direction on its own. --delay holds every frame that long,
--jitter adds a uniform offset in [-jitter, +jitter] per frame (frames overtake each other), and
--reorder sends that share of frames at once, past the delayed ones (netem's reorder: needs a
delay). On SIGTERM or SIGINT it prints, per direction, the frames seen, dropped and reordered.

Frames travel with their virtio-net header (PACKET_VNET_HDR): checksums that the sending stack left
to offload, and segmentation offload, are completed by the kernel on the way out, so the hosts need
no ethtool changes.
"""
import argparse
import heapq
import os
import random
import select
import signal
import socket
import sys
import time

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_VNET_HDR = 15
PACKET_OUTGOING = 4


def open_port(device):
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    sock.setsockopt(SOL_PACKET, PACKET_VNET_HDR, 1)
    sock.bind((device, ETH_P_ALL))
    sock.setblocking(False)
    return sock


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("a")
    parser.add_argument("b")
    parser.add_argument("--loss", type=float, default=0.0, help="percent of frames dropped")
    parser.add_argument("--delay", type=float, default=0.0, help="milliseconds")
    parser.add_argument("--jitter", type=float, default=0.0, help="milliseconds, +-")
    parser.add_argument("--reorder", type=float, default=0.0, help="percent sent at once")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if args.reorder > 0 and args.delay <= 0:
        parser.error("--reorder needs a --delay for frames to overtake")

    rng = random.Random(args.seed)
    ports = [open_port(args.a), open_port(args.b)]
    names = [f"{args.a}->{args.b}", f"{args.b}->{args.a}"]
    seen = [0, 0]
    dropped = [0, 0]
    reordered = [0, 0]
    held = []  # (due, sequence, outgoing port index, frame)
    sequence = 0
    loss = args.loss / 100.0
    reorder = args.reorder / 100.0
    delay = args.delay / 1000.0
    jitter = args.jitter / 1000.0

    def report(*_):
        for d in (0, 1):
            print(f"netns-wire: {names[d]}: {seen[d]} frames, {dropped[d]} dropped, "
                  f"{reordered[d]} sent ahead", file=sys.stderr, flush=True)
        os._exit(0)

    signal.signal(signal.SIGTERM, report)
    signal.signal(signal.SIGINT, report)
    print(f"netns-wire: {args.a} <-> {args.b}: loss {args.loss}%, delay {args.delay} ms "
          f"+- {args.jitter} ms, reorder {args.reorder}%", file=sys.stderr, flush=True)

    def send(port, frame):
        try:
            ports[port].send(frame)
        except OSError:
            pass  # the device is down or its queue full: the frame is lost, as on a wire

    while True:
        timeout = None
        if held:
            timeout = max(0.0, held[0][0] - time.monotonic())
        readable, _, _ = select.select(ports, [], [], timeout)
        for sock in readable:
            inbound = 0 if sock is ports[0] else 1
            while True:
                try:
                    frame, address = sock.recvfrom(70000)
                except BlockingIOError:
                    break
                except OSError:
                    break  # the device went down
                if address[2] == PACKET_OUTGOING:
                    continue  # our own frames, sent out on this device
                seen[inbound] += 1
                if loss > 0 and rng.random() < loss:
                    dropped[inbound] += 1
                    continue
                wait = delay
                if jitter > 0:
                    wait = max(0.0, wait + rng.uniform(-jitter, jitter))
                if reorder > 0 and rng.random() < reorder:
                    reordered[inbound] += 1
                    wait = 0.0
                if wait <= 0:
                    send(1 - inbound, frame)
                else:
                    sequence += 1
                    heapq.heappush(held, (time.monotonic() + wait, sequence, 1 - inbound, frame))
        now = time.monotonic()
        while held and held[0][0] <= now:
            _, _, port, frame = heapq.heappop(held)
            send(port, frame)


if __name__ == "__main__":
    main()
