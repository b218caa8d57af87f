"""connect_to_collector.py: a process that talks to a strobe collector the
way a runtime does, but is not what the collector may trust.

    connect_to_collector.py outsider LAUNCHER_PID HOLD_S [forge]
        Drops to user nobody (when root), finds the collector's abstract
        socket of `strobe sample` with pid LAUNCHER_PID in /proc/net/unix,
        connects, prints "connected PID" (its own pid), optionally sends a runtime-shaped
        handover (a memfd and its own pidfd) and holds the connection for
        HOLD_S seconds.
    connect_to_collector.py member
        Run under strobe: connects to the collector named in the
        environment (as a process of the run) and hands over a memfd with
        a pidfd of its parent (a forged handover), then exits 0.
"""
import array
import os
import socket
import sys
import time


def handover(sock, segment_fd, pidfd):
    fds = array.array("i", [segment_fd, pidfd]).tobytes()
    sock.sendmsg([os.getpid().to_bytes(4, "little")],
                 [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])


def segment():
    fd = os.memfd_create("forged")
    os.ftruncate(fd, 1 << 20)
    return fd


def outsider(launcher, hold, forge):
    if os.getuid() == 0:
        os.setgroups([])
        os.setgid(65534)
        os.setuid(65534)
    prefix = "@strobe-%s-" % launcher
    name, deadline = None, time.time() + 20
    while name is None and time.time() < deadline:
        with open("/proc/net/unix") as table:
            for line in table:
                fields = line.split()
                if len(fields) >= 8 and fields[7].startswith(prefix):
                    name = fields[7][1:]
                    break
        time.sleep(0.005)
    if name is None:
        print("no collector socket found")
        return 1
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    sock.connect("\0" + name)
    print("connected", os.getpid(), flush=True)
    if forge:
        handover(sock, segment(), os.pidfd_open(os.getpid()))
    time.sleep(hold)
    return 0


def member():
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    sock.connect("\0" + os.environ["STROBE_INTERNAL_COLLECTOR"])
    handover(sock, segment(), os.pidfd_open(os.getppid()))
    print("handed over")
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "outsider":
        sys.exit(outsider(sys.argv[2], float(sys.argv[3]), sys.argv[4:] == ["forge"]))
    sys.exit(member())
