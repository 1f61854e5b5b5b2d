#!/usr/bin/env python3
"""Generates node/src/cmd/command_info.txt from redis-server 7.0's own COMMAND INFO.

Usage: python3 node/src/cmd/gen_command_info.py [redis-server]

For every command and subcommand redis-server lists (COMMAND LIST), stores three fields of
its RESP3 COMMAND INFO entry, in the token format of scripts/gen-command-docs.py:

    = <full name>
    <command flags>    (a set: the node adds the few it has no bit for)
    <ACL categories>   (a set)
    <tips>             (a set)
    <key specs>        (an array of maps)

Name, arity, command flags and the legacy key range stay the node's own (what it does);
subcommands are listed from the node's command table.
"""

import importlib.util
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
spec = importlib.util.spec_from_file_location(
    "gendocs", os.path.join(ROOT, "scripts/gen-command-docs.py"))
g = importlib.util.module_from_spec(spec)
sys.argv = sys.argv[:2]
spec.loader.exec_module(g)
OUT = os.path.join(HERE, "command_info.txt")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        rp, rc = g.start(g.REDIS, g.free_port(), tmp)
        try:
            rc.cmd("HELLO", "3")
            names = sorted(n for _, n in rc.cmd("COMMAND", "LIST")[1])
            lines = []
            for name in names:
                entry = rc.cmd("COMMAND", "INFO", name)[1][0]
                fields = entry[1]
                assert fields[0][1] == name, (name, fields[0])
                lines.append("= " + name)
                for f in [fields[2]] + fields[6:9]:
                    g.emit(f, lines)
        finally:
            rp.kill()
    with open(OUT, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote %s: %d commands" % (OUT, sum(1 for l in lines if l.startswith("= "))))


if __name__ == "__main__":
    main()
