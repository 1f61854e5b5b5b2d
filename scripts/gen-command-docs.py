#!/usr/bin/env python3
"""Generates node/src/cmd/command_docs.txt from redis-server 7.0's own COMMAND DOCS.

Usage: scripts/gen-command-docs.py [redis-server] [tessera-node]

Starts both servers on loopback, asks tessera-node which commands it implements (COMMAND
LIST, subcommands included), and stores redis-server's RESP3 COMMAND DOCS reply for each
of them as a token stream, one token per line:

    = <full name>      start of one command's entry
    %<n>  *<n>  ~<n>   map / array / set of n elements (a map counts pairs)
    $<text>  +<text>   bulk / status string
    :<n>               integer

What is kept: summary, since, group, complexity, doc_flags, deprecated_since,
replaced_by and the argument trees (names, types, tokens, flags: interface facts).
"history" is left out (release-note prose), and so is "subcommands": the node lists its
own subcommands from its command table, each with its own entry.
"""

import os
import socket
import subprocess
import sys
import tempfile
import time

REDIS = sys.argv[1] if len(sys.argv) > 1 else "/usr/bin/redis-server"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESSERA = sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "target/debug/tessera-node")
OUT = os.path.join(ROOT, "node/src/cmd/command_docs.txt")
DROP = {"history", "subcommands"}


class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.f = self.s.makefile("rb")

    def cmd(self, *args):
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = a.encode()
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.s.sendall(out)
        return self.read()

    def read(self):
        line = self.f.readline().rstrip(b"\r\n")
        t, rest = chr(line[0]), line[1:].decode()
        if t in "$=":
            n = int(rest)
            if n < 0:
                return None
            data = self.f.read(n + 2)[:-2].decode()
            return ("$", data)
        if t == "+":
            return ("+", rest)
        if t == "-":
            raise RuntimeError(rest)
        if t == ":":
            return (":", int(rest))
        if t == "_":
            return None
        if t in "*~>":
            return (t, [self.read() for _ in range(int(rest))])
        if t == "%":
            return ("%", [(self.read(), self.read()) for _ in range(int(rest))])
        raise RuntimeError("unexpected RESP type " + t)


def start(binary, port, tmp):
    p = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", tmp],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(200):
        try:
            c = Conn(port)
            if c.cmd("PING") == ("+", "PONG"):
                return p, c
        except OSError:
            pass
        time.sleep(0.05)
    p.kill()
    raise RuntimeError(binary + " did not start")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def emit(v, out):
    t, x = v
    if t == "%":
        kept = [(k, val) for k, val in x if not (k[0] == "$" and k[1] in DROP)]
        out.append("%%%d" % len(kept))
        for k, val in kept:
            emit(k, out)
            emit(val, out)
    elif t in "*~":
        out.append("%s%d" % (t, len(x)))
        for e in x:
            emit(e, out)
    elif t in "$+":
        assert "\n" not in x and "\r" not in x, x
        out.append(t + x)
    elif t == ":":
        out.append(":%d" % x)
    else:
        raise RuntimeError(t)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        rp, rc = start(REDIS, free_port(), tmp)
        tp, tc = start(TESSERA, free_port(), tmp)
        try:
            rc.cmd("HELLO", "3")
            names = [n for _, n in tc.cmd("COMMAND", "LIST")[1]]
            lines = []
            for name in sorted(names):
                reply = rc.cmd("COMMAND", "DOCS", name)
                entries = reply[1]
                if not entries:
                    continue
                (_, full), doc = entries[0]
                lines.append("= " + full)
                emit(doc, lines)
        finally:
            rp.kill()
            tp.kill()
    with open(OUT, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote %s: %d commands" % (OUT, sum(1 for l in lines if l.startswith("= "))))


if __name__ == "__main__":
    main()
